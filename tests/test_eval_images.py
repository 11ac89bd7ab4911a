"""Images in published evaluations, through the `vtb` CLI against real HTTP servers on 127.0.0.1 (issue 13): too
many images told apart, the env keeping the last k, each image encoded once and never decoded to measure."""

from __future__ import annotations

from PIL import Image

from tests.support.chat_server import ChatServer
from tests.support.cli import eval_args
from tests.support.eval_tasks import answers, text_of, vtb, write_tasks
from vtb_app.evaluation.records import latest_records

# -- 12, 13: images ---------------------------------------------------------------------------------------------


def test_too_many_images_is_told_apart_and_the_env_can_keep_the_last_k(tmp_path):
    data = write_tasks(tmp_path / "data", 1, images=2)

    def vllm(request):
        n = sum(
            1
            for m in request["messages"]
            if isinstance(m.get("content"), list)
            for p in m["content"]
            if p.get("type") == "image_url"
        )
        if n > 1:
            return {
                "status": 400,
                "body": {
                    "error": {"message": "At most 1 image(s) may be provided in one prompt.", "type": "BadRequestError"}
                },
            }
        return {"content": "The total is 9."}

    with ChatServer(vllm) as agent:
        vtb(*eval_args(data, f"openai:m@{agent.base_url}", tmp_path / "all"))
        record = latest_records(tmp_path / "all" / "records.jsonl")["t0#0"]
        assert (
            record["status"] == "error"
            and "TooManyImagesError" in record["error"]
            and "--limit-mm-per-prompt" in record["error"]
        )
        assert len(agent.requests) == 1  # no retries at halved resolution
        vtb(*eval_args(data, f"openai:m@{agent.base_url}", tmp_path / "last", "--max-dialogue-images", 1))
        assert latest_records(tmp_path / "last" / "records.jsonl")["t0#0"]["score"]["passed"]
        texts = " ".join(text_of(m) for m in agent.requests[-1]["messages"])
        assert "[img0.png is no longer shown" in texts or "is no longer shown: only the last 1 images are kept" in texts


def test_images_are_encoded_once_and_never_decoded_to_measure(tmp_path, monkeypatch):
    import base64
    import io

    from PIL import Image as PILImage

    from vtb_agents.images import ImagePolicy
    from vtb_agents.openai_chat import OpenAIChatAgent

    buffer = io.BytesIO()
    Image.effect_noise((4000, 3000), 20).convert("RGB").save(
        buffer, format="JPEG", quality=90
    )  # a 12-megapixel photo, ~6 MB
    url = "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode()
    observation = {
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "[t0] total?"}, {"type": "image_url", "image_url": {"url": url}}],
            }
        ],
        "images": [],
        "tools": [],
    }
    decodes = []  # every pixel decode PIL starts (one per image actually decoded)
    original = PILImage._getdecoder
    monkeypatch.setattr(
        PILImage, "_getdecoder", lambda mode, name, *args: (decodes.append(name), original(mode, name, *args))[1]
    )
    with ChatServer(answers()) as server:
        agent = OpenAIChatAgent("m", server.base_url)
        for _ in range(3):
            agent.act(observation)
        assert decodes == []  # within the policy: measured from the header, sent as is
        assert server.requests[0]["messages"][0]["content"][1]["image_url"]["url"] is not None
        small = OpenAIChatAgent("m", server.base_url, image_policy=ImagePolicy(max_side=1000))
        for _ in range(3):
            small.act(observation)
        assert decodes == ["jpeg"] and small.images.misses == 1 and small.images.hits == 2  # decoded and encoded once
        sent = server.requests[-1]["messages"][0]["content"][1]["image_url"]["url"]
        assert Image.open(io.BytesIO(base64.b64decode(sent.split(",", 1)[1]))).size == (1000, 750)
