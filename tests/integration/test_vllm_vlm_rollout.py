"""A VLM rollout's prompts as a real vLLM server receives them: each image's tokens expanded exactly once.

``run_episodes`` plays the harbour task (one image; the scripted Idefics3 model crops it, so its second
prompt holds the task image and the crop) with ``VLLMGenerator``, through

- TRL 1.16's colocate mode's input: each row's ids plus its raw images, the ``TokensPrompt`` with
  ``multi_modal_data`` that TRL hands ``vllm.LLM.generate``. Without a GPU vLLM runs as a server, so
  ``TokenPromptEngine`` sends those rows to vLLM's token-in endpoint with the images as content parts
  (the same renderer processes them) and reads back vLLM's final prompt ids (``return_token_ids``);
- TRL 1.16's server mode, through TRL's own ``VLLMGeneration.generate`` and ``VLLMClient`` (image
  features from the server, placed on the runs of image tokens); only the weight-sync communicator,
  which needs CUDA, is left out. vLLM's own prompt-token counter says what it processed.

Either way vLLM's prompt must equal the episode's expanded sequence before each policy step (what
the loss is computed on). The old path, expanded ids with raw images (TRL issue #6294), is shown
failing the same check. Run by ``scripts/test_vllm.sh`` (``pytest -m vllm``).
"""

from __future__ import annotations

import base64
import io
import re
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from PIL import Image

from tests.integration.conftest import VLLMServer
from tests.integration.test_vllm_episodes import _harbour_task
from vtb_agents.rollout import ChatRenderer, Episode, VLLMGenerator, run_episodes
from vtb_env.batch import EnvPool
from vtb_env.env import VisualToolBenchEnv
from vtb_env.tools import default_tools
from vtb_rewards.compose import EpisodeReward
from vtb_rewards.judge.judge import Judge

pytestmark = pytest.mark.vllm

MAX_TOKENS = 64


def _root(server: VLLMServer) -> str:
    return server.base_url.removesuffix("/v1")


def _data_url(image: Image.Image) -> str:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


class TokenPromptEngine:
    """TRL colocate's ``vllm_generation`` on a vLLM server: ids plus raw images, vLLM's processor expands them.

    Each row goes to ``/inference/v1/generate`` as ``token_ids`` with its images as ``content_parts``, which
    vLLM renders as the ``TokensPrompt(prompt_token_ids=..., multi_modal_data=...)`` TRL builds in colocate
    mode; ``prompts_seen`` keeps vLLM's final prompt ids per call (after its placeholder expansion).
    """

    mode = "colocate"

    def __init__(self, server: VLLMServer):
        self.server = server
        self.prompts_seen: list[list[int]] = []

    def generate(self, prompts: list[list[int]], images: list[list | None] | None, num_generations: int) -> tuple:
        assert num_generations == 1
        choices = []
        for ids, row_images in zip(prompts, images or [None] * len(prompts), strict=True):
            response = httpx.post(
                f"{_root(self.server)}/inference/v1/generate",
                json={
                    "model": self.server.model,
                    "token_ids": ids,
                    "content_parts": [{"type": "image_url", "url": _data_url(image)} for image in row_images or []],
                    "return_token_ids": True,
                    "sampling_params": {"max_tokens": MAX_TOKENS, "temperature": 0.0, "logprobs": 0},
                },
                timeout=120,
            )
            response.raise_for_status()
            self.prompts_seen.append(response.json()["prompt_token_ids"])
            choices += response.json()["choices"]
        logprobs = [[[entry["logprob"]] for entry in choice["logprobs"]["content"]] for choice in choices]
        return self.prompts_seen[-len(prompts) :], [choice["token_ids"] for choice in choices], logprobs, None


def _trl_server_mode(server: VLLMServer, processor: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """TRL's own ``VLLMGeneration`` in server mode, without the weight-sync communicator (CUDA only).

    vLLM lives in its own venv (.venv-vllm); TRL's client only talks HTTP to it, but checks that vLLM imports.
    """
    from accelerate import Accelerator
    from trl.generation import vllm_client
    from trl.generation.vllm_client import VLLMClient
    from trl.generation.vllm_generation import VLLMGeneration

    monkeypatch.setattr(vllm_client, "is_vllm_available", lambda: True)

    class WithoutWeightSync(VLLMGeneration):
        def _init_vllm(self) -> None:
            self.vllm_client = VLLMClient(base_url=self.server_base_url, connection_timeout=30)

    return WithoutWeightSync(
        model=None,
        accelerator=Accelerator(cpu=True),
        processing_class=processor,
        mode="server",
        server_base_url=_root(server),
        temperature=0.0,
        max_completion_length=MAX_TOKENS,
    )


def _play(server: VLLMServer, vllm_generation: Any) -> tuple[Episode, ChatRenderer]:
    from transformers import AutoProcessor

    renderer = ChatRenderer(AutoProcessor.from_pretrained(server.model_dir))
    env = VisualToolBenchEnv([_harbour_task()], tools=default_tools(), reward=EpisodeReward(judge=Judge(backend=None)))
    pool = EnvPool([env])
    try:
        (episode,) = run_episodes(
            pool, ["harbour"], VLLMGenerator(SimpleNamespace(vllm_generation=vllm_generation)), renderer
        )
    finally:
        pool.close()
    return episode, renderer


def _prompts_before_each_policy_step(episode: Episode) -> list[list[int]]:
    """The episode's expanded sequence (what the loss is computed on) up to each policy step."""
    sequence = episode.prompt_ids + episode.completion_ids
    mask = [0] * len(episode.prompt_ids) + episode.env_mask
    starts = [i for i in range(len(mask)) if mask[i] == 1 and mask[i - 1] == 0]
    return [sequence[:start] for start in starts]


def _image_tokens_per_image(renderer: ChatRenderer) -> int:
    return renderer.processor.image_seq_len  # Idefics3 without splitting: one run of image_seq_len per image


def _prompt_tokens_total(server: VLLMServer) -> float:
    metrics = httpx.get(f"{_root(server)}/metrics", timeout=30).text
    return float(re.search(r"^vllm:prompt_tokens_total\{[^}]*\} (\S+)$", metrics, re.MULTILINE).group(1))


def test_colocate_rows_are_expanded_once_by_vllm(scripted_vlm_server):
    engine = TokenPromptEngine(scripted_vlm_server)
    episode, renderer = _play(scripted_vlm_server, engine)

    assert episode.policy_steps == 2 and episode.image_names == ["image_1.png", "transformed_image_0.png"]
    assert len(episode.record.tool_calls) == 1 and "reward_error" not in episode.components
    image_token = renderer.tokenizer.convert_tokens_to_ids(renderer.processor.image_token)
    expected = _prompts_before_each_policy_step(episode)
    # vLLM's prompts are the episode's training ids, token for token: each image expanded once, by vLLM.
    assert engine.prompts_seen == expected
    per_image = _image_tokens_per_image(renderer)
    assert [prompt.count(image_token) for prompt in engine.prompts_seen] == [per_image, 2 * per_image]
    assert episode.placeholder_ids.count(image_token) == 2  # what was sent: one placeholder per image


def test_expanded_ids_with_raw_images_are_expanded_twice(scripted_vlm_server):
    """The old colocate path (TRL #6294): the same check sees vLLM expand the processor's expansion again."""
    engine = TokenPromptEngine(scripted_vlm_server)
    episode, renderer = _play(scripted_vlm_server, engine)
    first_prompt = _prompts_before_each_policy_step(episode)[0]
    image_token = renderer.tokenizer.convert_tokens_to_ids(renderer.processor.image_token)

    (seen,), _, _, _ = engine.generate([first_prompt], [episode.images[:1]], num_generations=1)
    # vLLM expands the first image token of the processor's run a second time (the other three stay).
    assert seen.count(image_token) == 2 * _image_tokens_per_image(renderer) - 1
    assert len(seen) > len(first_prompt)


@pytest.mark.xfail(
    raises=KeyError,
    strict=True,
    reason="TRL 1.16's parse_logprobs reads 'token' ('token_id:N') from /inference/v1/generate, whose logprobs "
    "in vLLM 0.32 carry 'token_id': server mode cannot generate for a VLM prompt with this pair of versions",
)
def test_server_mode_sends_the_expanded_ids_through_trls_own_client(scripted_vlm_server, monkeypatch):
    from transformers import AutoProcessor

    vllm_generation = _trl_server_mode(
        scripted_vlm_server, AutoProcessor.from_pretrained(scripted_vlm_server.model_dir), monkeypatch
    )
    before = _prompt_tokens_total(scripted_vlm_server)
    episode, renderer = _play(scripted_vlm_server, vllm_generation)
    processed = _prompt_tokens_total(scripted_vlm_server) - before

    assert episode.policy_steps == 2 and len(episode.images) == 2
    # vLLM's engine processed exactly the expanded ids, no more: with features placed on the runs of image
    # tokens it expands nothing (ids sent as placeholders would have failed TRL's one-run-per-image check).
    assert processed == sum(len(prompt) for prompt in _prompts_before_each_policy_step(episode))
