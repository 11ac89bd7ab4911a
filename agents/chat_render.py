"""The policy's chat template over env observations (``ChatRenderer``), through the view its tokenizer names.

A text policy reads the env's pictures through an observation view (``vtb_env.ocr_view``: the words
OCR reads in each image), named by ``image_view`` in its tokenizer config; ``set_image_view``
overrides it for a run (``--image-view``).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any, Callable, Sequence

from PIL import Image

from vtb_agents.generation import is_processor
from vtb_env.observation import map_image_parts
from vtb_env.ocr_view import VIEWS, make_view

# Chat templates shipped with the package (agents/templates), by the name ``--chat-template`` takes.
SHIPPED_TEMPLATES = {"chatml-text": "chatml_text.jinja"}
IMAGE_VIEWS = ("pixels", *VIEWS)  # pixels: no view (a VLM's images; a text policy sees their names)


def policy_view(processing_class: Any) -> Callable[[dict[str, Any]], dict[str, Any]] | None:
    """The observation view the policy's tokenizer asks for with ``image_view`` in its config (one of
    ``vtb_env.ocr_view.VIEWS``, sharing ``ocr_view.default_cache()``), or None."""
    tokenizer = getattr(processing_class, "tokenizer", processing_class)
    return make_view((getattr(tokenizer, "init_kwargs", None) or {}).get("image_view"))


def chat_template_text(name_or_path: str | Path) -> str:
    """The Jinja text of a shipped template (a name in ``SHIPPED_TEMPLATES``) or of a template file."""
    if name_or_path in SHIPPED_TEMPLATES:
        return resources.files("vtb_agents").joinpath("templates", SHIPPED_TEMPLATES[str(name_or_path)]).read_text()
    path = Path(name_or_path)
    if not path.is_file():
        shipped = sorted(SHIPPED_TEMPLATES)
        raise ValueError(f"chat template {str(name_or_path)!r}: no such file, and not one of {shipped}")
    return path.read_text(encoding="utf-8")


def set_chat_template(processing_class: Any, name_or_path: str | Path) -> None:
    """Render the policy's dialogues with another template (``chat_template_text``), for its tokenizer and, for a
    VLM, its processor; ``save_pretrained`` keeps it with the checkpoint."""
    template = chat_template_text(name_or_path)
    for holder in {id(x): x for x in (processing_class, getattr(processing_class, "tokenizer", None)) if x}.values():
        holder.chat_template = template


def set_image_view(processing_class: Any, image_view: str) -> None:
    """Make the policy read through ``image_view`` (one of ``IMAGE_VIEWS``), overriding its tokenizer config; kept in
    the config ``save_pretrained`` writes, so a checkpoint trained through a view is evaluated through it too."""
    if image_view not in IMAGE_VIEWS:
        raise ValueError(f"unknown image view {image_view!r}; choose one of {IMAGE_VIEWS}")
    tokenizer = getattr(processing_class, "tokenizer", processing_class)
    if image_view == "pixels":
        tokenizer.init_kwargs.pop("image_view", None)
    else:
        tokenizer.init_kwargs["image_view"] = image_view


class ChatRenderer:
    """The policy's chat template applied to env messages; image parts become ``{"type": "image"}``.

    With a processor (vision-language policy) ``encode`` expands each image placeholder into the
    model's image tokens for the given images; with a tokenizer placeholders stay text.
    ``view``: applied to every observation before it is rendered (``start_episode``, ``append_env_reply``);
    by default the one the policy's tokenizer asks for (``policy_view``), e.g. ``vtb_env.ocr_view.OcrView``
    for a text policy that reads the images' words.
    """

    def __init__(
        self,
        processing_class: Any,
        *,
        view: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        **template_kwargs: Any,
    ):
        self.processor = processing_class if is_processor(processing_class) else None
        self.tokenizer = getattr(processing_class, "tokenizer", processing_class)
        self.view = view if view is not None else policy_view(processing_class)
        self.template_kwargs = template_kwargs

    def shown(self, observation: dict[str, Any]) -> dict[str, Any]:
        """The observation as the policy is shown it (through ``view``)."""
        return self.view(observation) if self.view is not None else observation

    @property
    def is_vision(self) -> bool:
        return self.processor is not None

    def text(
        self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]], add_generation_prompt: bool
    ) -> str:
        return self.tokenizer.apply_chat_template(
            [_plain_images(m) for m in messages],
            tools=list(tools) or None,
            tokenize=False,
            add_generation_prompt=add_generation_prompt,
            **self.template_kwargs,
        )

    def encode(self, text: str, images: Sequence[Image.Image] = ()) -> list[int]:
        """Token ids of ``text``; for a VLM, ``images`` are those of its placeholders, in order."""
        if not self.is_vision:
            return self.placeholder_tokens(text)
        placeholders = text.count(self.processor.image_token)
        if placeholders != len(images):
            raise ValueError(
                f"the rendered text has {placeholders} image placeholders ({self.processor.image_token!r}) "
                f"but {len(images)} images arrived with it"
            )
        if not images:
            return self.placeholder_tokens(text)
        return list(self.processor(text=[text], images=[list(images)], add_special_tokens=False)["input_ids"][0])

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    def placeholder_tokens(self, text: str) -> list[int]:
        """Token ids of ``text`` with each image placeholder left as is (tokenizer only, no image processor)."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def appended_text(
        self, before: Sequence[dict[str, Any]], after: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]
    ) -> str:
        """Text the template adds going from ``before`` (ending with the policy's message) to ``after`` +
        generation prompt."""
        head = self.text(before, tools, add_generation_prompt=False)
        full = self.text(after, tools, add_generation_prompt=True)
        if not full.startswith(head):
            raise ValueError(
                "the chat template is not prefix-preserving: appending messages rewrote earlier text, "
                "so env tokens cannot be isolated"
            )
        return full[len(head) :]


def _plain_images(message: dict[str, Any]) -> dict[str, Any]:
    return map_image_parts([message], lambda part, index: {"type": "image"})[0]
