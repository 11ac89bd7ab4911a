"""verl 0.9.1's own code driving the integration: its config, dataset, agent-loop worker, registry and tool loop.

The whole rollout path of verl's trainer below the inference server runs for real: our parquet
rows -> ``RLHFDataset`` + ``collate_fn`` -> ``DataProto`` -> ``AgentLoopWorker.generate_sequences``
(agent loops looked up by the rows' ``agent_name``, built by hydra from the YAML we write, tools
built by verl's registry from our tools YAML) -> the output ``DataProto`` with ``rm_scores``.
The one stand-in is the inference server: ``HFServer`` implements verl's ``LLMServerClient.generate``
interface with a tiny scripted transformers model (it calls the tool once per user turn, then
answers "The answer is 42."). Tool calls run in the real sandbox.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("verl", reason="verl runs in its own venv with its own pins: scripts/test_verl.sh (CI stage 3)")

import pandas as pd  # noqa: E402
import verl  # noqa: E402
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker  # noqa: E402
from verl.experimental.agent_loop.tool_parser import ToolParser  # noqa: E402
from verl.protocol import DataProto  # noqa: E402
from verl.tools.tool_registry import initialize_tools_from_config  # noqa: E402
from verl.trainer.ppo.reward import get_custom_reward_fn  # noqa: E402
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn  # noqa: E402
from verl.workers.rollout.replica import TokenOutput  # noqa: E402

from tests.support.env_tools import png, value_task  # noqa: E402
from tests.support.tiny_models import build_scripted_model  # noqa: E402
from vtb_agents.rollout import HFGenerator  # noqa: E402
from vtb_app.integrations.verl import VTBTool, VTBToolParser  # noqa: E402
from vtb_app.integrations.verl_rows import agent_loop_config, agent_row, tool_agent_row, tools_config  # noqa: E402
from vtb_env.tools.base import ToolRegistry  # noqa: E402
from vtb_env.tools.calculator import Calculator  # noqa: E402
from vtb_env.tools.python_tools import PythonImageProcessing  # noqa: E402

FACTORY = f"{__name__}:registry"
REWARD = "tests.support.env_tools:exact_reward"
CROP = "from PIL import Image\nImage.open('image_1.png').crop((0, 0, 20, 10)).save('transformed_image_0.png')"


def registry() -> ToolRegistry:
    return ToolRegistry([PythonImageProcessing(), Calculator()])


class HFServer:
    """verl's ``LLMServerClient.generate`` interface, served by a transformers model (the one stand-in)."""

    def __init__(self, model_path: Path):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        model = AutoModelForCausalLM.from_pretrained(model_path)
        self.generate_ids = HFGenerator(model, AutoTokenizer.from_pretrained(model_path), max_new_tokens=96)
        self.calls = 0

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], image_data=None, **kwargs: Any
    ) -> TokenOutput:
        assert image_data is None  # a text policy gets no pixels
        self.calls += 1
        generation = self.generate_ids([prompt_ids])[0]
        return TokenOutput(token_ids=generation.token_ids, log_probs=generation.logprobs, stop_reason="completed")


@pytest.fixture(scope="module")
def policy(tmp_path_factory) -> Path:
    return build_scripted_model(
        tmp_path_factory.mktemp("verl_policy"),
        "llama",
        tool_call={"name": "python_image_processing", "arguments": {"code": CROP}},
    )


def _verl_config(policy: Path, overrides: list[str]):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer" / "config"), version_base=None):
        return compose(
            config_name="ppo_trainer",
            overrides=[
                f"actor_rollout_ref.model.path={policy}",
                "actor_rollout_ref.rollout.name=vllm",
                "actor_rollout_ref.rollout.prompt_length=2048",
                "actor_rollout_ref.rollout.response_length=1536",
                "data.return_raw_chat=True",
                *overrides,
            ],
        )


def _batch(config, parquet: Path, worker: AgentLoopWorker) -> DataProto:
    dataset = RLHFDataset(data_files=[str(parquet)], tokenizer=worker.tokenizer, config=config.data, processor=None)
    return DataProto.from_single_dict(collate_fn([dataset[i] for i in range(len(dataset))]))


def _responses(out: DataProto, tokenizer) -> list[str]:
    """The response strings as verl's reward managers decode them (special tokens skipped)."""
    return [
        tokenizer.decode(ids[mask.bool()].tolist(), skip_special_tokens=True)
        for ids, mask in zip(
            out.batch["responses"], out.batch["attention_mask"][:, -out.batch["responses"].size(1) :], strict=True
        )
    ]


def test_vtb_agent_loop_plays_multi_turn_episodes_inside_verls_worker(policy, tmp_path):
    rows = [agent_row(value_task("right", 42, turns=2), index=0), agent_row(value_task("wrong", 7, turns=1), index=1)]
    pd.DataFrame(rows).to_parquet(tmp_path / "train.parquet")
    loops = tmp_path / "agent_loops.yaml"
    # the scripted policy calls in every turn
    loops.write_text(
        yaml.safe_dump(agent_loop_config(FACTORY, reward_factory=REWARD, max_tool_calls=3, cap_scope="turn"))
    )
    config = _verl_config(
        policy,
        [
            f"data.train_files={tmp_path / 'train.parquet'}",
            f"actor_rollout_ref.rollout.agent.agent_loop_config_path={loops}",
        ],
    )
    server = HFServer(policy)
    worker = AgentLoopWorker(config, llm_client=server)
    out = asyncio.run(worker.generate_sequences(_batch(config, tmp_path / "train.parquet", worker)))

    scores = out.batch["rm_scores"].sum(-1).tolist()
    info = out.non_tensor_batch
    assert list(info["vtb_task_id"]) == ["right", "wrong"]
    assert scores == pytest.approx(list(info["vtb_reward"]))
    assert scores[0] > scores[1]
    assert [c["rubric_score"] for c in info["vtb_reward_components"]] == [1.0, 0.0]
    # The scripted policy calls while the dialogue has more user messages than tool results: the
    # env's message showing the crop is a user message, so turn 1 has two calls (the second one
    # saves no new image: its file name is not the next free index); turn 2 one; each turn ends
    # with the answer.
    assert list(info["vtb_tool_calls"]) == [3.0, 2.0]
    assert server.calls == (3 + 2) + (2 + 1)
    assert list(info["vtb_image_names"][0]) == ["image_1.png", "transformed_image_0.png", "image_2.png"]
    assert "rollout_log_probs" in out.batch.keys()  # the server's sampling log-probs reach verl
    mask = out.batch["response_mask"][0]
    assert 0 < mask.sum() < out.batch["attention_mask"][0, -mask.size(0) :].sum()  # env tokens are masked out
    text = _responses(out, worker.tokenizer)[0]
    assert (
        "Question 2: what is the value?[image_2.png]" in text
        and "transformed_image_0.png.[transformed_image_0.png]" in text
        and text.count("The answer is 42.") == 2
    )


def test_vtb_agent_loop_stops_at_response_length_and_scores_the_unfinished_episode(policy, tmp_path):
    pd.DataFrame([agent_row(value_task("long", 42, turns=2))]).to_parquet(tmp_path / "train.parquet")
    loops = tmp_path / "agent_loops.yaml"
    loops.write_text(yaml.safe_dump(agent_loop_config(FACTORY, reward_factory=REWARD)))
    config = _verl_config(
        policy,
        [
            f"data.train_files={tmp_path / 'train.parquet'}",
            f"actor_rollout_ref.rollout.agent.agent_loop_config_path={loops}",
            "actor_rollout_ref.rollout.response_length=200",
        ],
    )
    worker = AgentLoopWorker(config, llm_client=HFServer(policy))
    out = asyncio.run(worker.generate_sequences(_batch(config, tmp_path / "train.parquet", worker)))
    info = out.non_tensor_batch
    assert list(info["vtb_length_truncated"]) == [1.0] and out.batch["responses"].size(1) == 200
    assert out.batch["rm_scores"].sum().item() == pytest.approx(info["vtb_reward"][0])
    assert info["vtb_reward_components"][0]["rubric_score"] == 0.0  # no final answer yet


def test_agent_row_refuses_a_row_without_the_task():
    from vtb_app.integrations.verl_rows import task_from_row

    with pytest.raises(ValueError, match="not a vtb_agent row"):
        task_from_row({"index": 0})
    row = agent_row(value_task("t", 1, turns=2))["extra_info"]
    with pytest.raises(ValueError, match="names 2 images but the row stores 1"):
        task_from_row({**row, "vtb_images": row["vtb_images"][:1]})


def test_tool_agent_loop_runs_vtbtool_through_verls_registry_and_scores_with_custom_reward(policy, tmp_path):
    task = value_task("later", 42, turns=2)
    row = tool_agent_row(task, ["python_image_processing", "calculator"], turn_index=1, show_images=False)
    assert row["prompt"][1] == {"role": "assistant", "content": "It is 42."}  # the earlier turn is in the dialogue
    pd.DataFrame([row]).to_parquet(tmp_path / "train.parquet")
    tools_yaml = tmp_path / "tools.yaml"
    tools_yaml.write_text(
        yaml.safe_dump(tools_config(["python_image_processing", "calculator"], FACTORY, return_images=False))
    )
    tools = initialize_tools_from_config(str(tools_yaml))  # verl's registry, our YAML
    assert [type(t) for t in tools] == [VTBTool, VTBTool] and tools[1].tool_schema.function.parameters.required == [
        "expression"
    ]
    assert ToolParser.get_tool_parser("vtb", None).__class__ is VTBToolParser

    config = _verl_config(
        policy,
        [
            f"data.train_files={tmp_path / 'train.parquet'}",
            "actor_rollout_ref.rollout.multi_turn.enable=True",
            f"actor_rollout_ref.rollout.multi_turn.tool_config_path={tools_yaml}",
            "actor_rollout_ref.rollout.multi_turn.format=vtb",
            "actor_rollout_ref.rollout.multi_turn.max_tool_response_length=4096",
            "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=4",
            "reward.custom_reward_function.path=pkg://vtb_rewards.grpo",
            "reward.custom_reward_function.name=compute_score",
        ],
    )
    worker = AgentLoopWorker(config, llm_client=HFServer(policy))
    out = asyncio.run(worker.generate_sequences(_batch(config, tmp_path / "train.parquet", worker)))
    text = _responses(out, worker.tokenizer)[0]
    assert (
        "Error executing tool" not in text and "transformed_image_0.png" in text
    )  # the real crop ran on the row's image
    assert text.rstrip().endswith("The answer is 42.")

    score = get_custom_reward_fn(config)  # verl's loader of reward.custom_reward_function (pkg:// path)
    extra = out.non_tensor_batch["extra_info"][0]
    right = score(
        data_source="visualtoolbench",
        solution_str=text,
        ground_truth=out.non_tensor_batch["reward_model"][0]["ground_truth"],
        extra_info=extra,
    )
    assert right["rubric_score"] == 1.0 and right["score"] > 0


def test_vtbtool_state_follows_the_trajectory_not_the_tool_object():
    """verl creates and releases a tool per call: the image numbering must continue across calls and tools."""
    vision, calc = (
        VTBTool({"type": "native", "tool": "python_image_processing", "factory": FACTORY}),
        VTBTool({"type": "native", "tool": "calculator", "factory": FACTORY}),
    )

    class AgentData:  # what verl passes as ``agent_data``: the prompt messages carry the image bytes
        messages = [
            {
                "role": "user",
                "content": [{"type": "image", "bytes": png(48, 32, color=(1, 2, 3))}, {"type": "text", "text": "q"}],
            }
        ]
        tools_kwargs: dict = {}

    async def calls(agent_data):
        texts = []
        for tool, args in [
            (vision, {"code": CROP}),
            (calc, {"expression": "6*7"}),
            (vision, {"code": CROP.replace("transformed_image_0", "transformed_image_1")}),
            (vision, {"code": 5}),
        ]:
            instance, _ = await tool.create(create_kwargs={"task_id": "t", "turn_index": 0})
            response, _, metrics = await tool.execute(instance, args, agent_data=agent_data)
            await tool.release(instance)
            texts.append((response, metrics))
        return texts

    first, second = AgentData(), AgentData()
    results = asyncio.run(calls(first))
    assert [len(r.image or []) for r, _ in results] == [1, 0, 1, 0]
    assert "42" in results[1][0].text
    assert "transformed_image_1.png" in results[2][0].text and results[2][0].image[0].size == (20, 10)
    assert results[3][1]["error"] and results[3][0].text  # a bad call is reported, not raised
    assert "transformed_image_0.png" in asyncio.run(calls(second))[0][0].text  # a new trajectory starts at 0


def test_the_default_factories_load_from_an_installed_package(tmp_path):
    """The YAML's default "module:callable" strings resolve without the repository on sys.path."""
    code = (
        "import importlib, sys\n"
        "from vtb_app.integrations.verl_rows import DEFAULT_FACTORY, DEFAULT_REWARD_FACTORY\n"
        "assert not any(p.rstrip('/') == sys.argv[1] for p in sys.path), sys.path\n"
        "for spec in (DEFAULT_FACTORY, DEFAULT_REWARD_FACTORY):\n"
        "    module, _, name = spec.partition(':')\n"
        "    assert callable(getattr(importlib.import_module(module), name)), spec\n"
        "print('ok')\n"
    )
    repo = str(Path(__file__).resolve().parents[1])
    run = subprocess.run(
        [sys.executable, "-c", code, repo],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-2000:]


def test_vtbtool_admits_tool_images_as_the_env_does():
    """Bytes that are no image, and a pixel bomb, from the real sandbox: refused with a note, never raised."""
    vision = VTBTool({"type": "native", "tool": "python_image_processing", "factory": FACTORY})

    class AgentData:
        messages = [
            {"role": "user", "content": [{"type": "image", "bytes": png(48, 32)}, {"type": "text", "text": "q"}]}
        ]
        tools_kwargs: dict = {}

    codes = [
        "open('transformed_image_0.png', 'w').write('not a png')",
        "from PIL import Image\nImage.new('1', (9000, 9000)).save('transformed_image_0.png')",  # 81 Mpx in ~10 KB
        CROP,
    ]

    async def calls():
        responses = []
        for code in codes:
            instance, _ = await vision.create(create_kwargs={"task_id": "t", "turn_index": 0})
            responses.append((await vision.execute(instance, {"code": code}, agent_data=AgentData))[0])
        return responses

    garbage, bomb, crop = asyncio.run(calls())
    assert not garbage.image and "transformed_image_0.png was not shown: cannot read the image header" in garbage.text
    assert not bomb.image and "the images of one call are capped" in bomb.text
    assert crop.image[0].size == (20, 10) and "[transformed_image_0.png]" in crop.text  # the index was not used up
