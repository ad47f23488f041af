"""One chat-message schema for every model, with converters to provider formats.

A :class:`Message` holds interleaved :class:`TextPart` and :class:`ImagePart` items.  Images are stored encoded
with their format and a hash, which (not the bytes) goes into cache keys (:func:`canonical_messages`): of a
``file`` sent as it is, the sha256 of its bytes (:func:`vlmcheck.core.inputs.read_image_part`); of any other image,
the sha256 of its RGB pixels (``pixels``), so the same picture in another encoding shares its cache entries.
"""

from __future__ import annotations

import hashlib
import io
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, SerializationInfo, model_serializer

from .._lazy import lazy_module

Image = lazy_module("PIL.Image")  # Pillow on first use (vlmcheck/_lazy.py)

from .images import (DEFAULT_FORMAT, SourceFile, decode_image, image_hash, mime_type, source_file,
                     to_rgb, transport_bytes)
from .probe import Header

# pybase64 (SIMD): the standard library's text (tested) an order of magnitude faster, for every image sent
from pybase64 import b64decode as _b64_bytes
from pybase64 import b64encode_as_string as _b64_text


class TextPart(BaseModel):
    type: Literal["text"] = "text"
    text: str


class ImagePart(BaseModel):
    """An encoded image; ``data`` serialises as base64 in JSON.  A part may hold only its data URL
    (:meth:`keep_url_only`): ``data`` is then decoded from it when read, so every reader sees the same part."""

    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")

    type: Literal["image"] = "image"
    data: bytes = Field(repr=False)
    format: str = DEFAULT_FORMAT
    sha256: str  # of the pixels, or of ``data`` where ``key`` is "file"
    width: int
    height: int
    key: Literal["pixels", "file"] = "pixels"
    _data_url: str | None = PrivateAttr(default=None)
    _pixel_sha256: str | None = PrivateAttr(default=None)

    @classmethod
    def from_pil(cls, img: Image.Image) -> "ImagePart":
        """``img`` as RGB, keyed by its pixels' hash: sent as the file it was read from where that decodes to
        exactly these pixels (:func:`~vlmcheck.core.images.source_file`), else encoded as PNG once per process."""
        source = source_file(img)
        if source is not None and img.mode == "RGB" and image_hash(img) == source.sha256:
            return cls.from_source(source, img.width, img.height)
        rgb = to_rgb(img)
        digest = image_hash(rgb)
        return cls(data=transport_bytes(rgb, digest, DEFAULT_FORMAT), format=DEFAULT_FORMAT, sha256=digest,
                   width=rgb.width, height=rgb.height)

    @classmethod
    def from_source(cls, source: SourceFile, width: int, height: int) -> "ImagePart":
        """The file ``source`` as it is, known by the pixel hash taken when it was decoded."""
        return cls(data=source.data, format=source.format, sha256=source.sha256, width=width, height=height)

    @classmethod
    def from_file(cls, data: bytes, header: Header) -> "ImagePart":
        """A file sent as it is (``header.sendable``, see :func:`~vlmcheck.core.probe.probe`), keyed by its bytes."""
        return cls(data=data, format=header.format, sha256=hashlib.sha256(data).hexdigest(), width=header.width,
                   height=header.height, key="file")

    def pixel_sha256(self) -> str:
        """The hash of the decoded pixels, decoding a file part once (stores made before file keys need it)."""
        if self.key == "pixels":
            return self.sha256
        if self._pixel_sha256 is None:
            img = decode_image(self.data)
            source = source_file(img)
            self._pixel_sha256 = source.sha256 if source is not None else image_hash(img)
        return self._pixel_sha256

    def to_pil(self) -> Image.Image:
        img = Image.open(io.BytesIO(self.data))
        img.load()
        return to_rgb(img)

    @property
    def mime_type(self) -> str:
        return mime_type(self.format)

    def b64(self) -> str:
        url = self.__pydantic_private__.get("_data_url")
        if url is not None:
            return url[url.index(",") + 1:]
        return _b64_text(self.data)

    def keep_url_only(self) -> None:
        """Make the data URL and let go of the bytes: a request in flight holds the image once, as text."""
        self.data_url()
        self.__dict__.pop("data", None)

    def __getattr__(self, name: str) -> Any:
        # reached only for a name not in the instance's dict: ``data`` after keep_url_only
        if name == "data":
            url = self.__pydantic_private__.get("_data_url")
            if url is not None and "data" not in self.__dict__:
                return _b64_bytes(url[url.index(",") + 1:])
        return super().__getattr__(name)  # type: ignore[misc]

    @model_serializer(mode="wrap")
    def _dump(self, handler: Any, info: SerializationInfo) -> Any:
        if "data" in self.__dict__:
            return handler(self)
        # a part that holds only its URL dumps as the part it was: its bytes put back for the dump
        copy = self.model_copy()
        fields = {k: self.data if k == "data" else self.__dict__[k] for k in type(self).model_fields}
        object.__setattr__(copy, "__dict__", fields)  # in the fields' order, as the part it was
        return handler(copy)

    def data_url(self) -> str:
        """``data:`` URL of the bytes, made once per part (a part sent again, or retried, reuses it)."""
        # the private attributes' own dict, read directly: pydantic's __getattr__ is slow on a hot path
        private = self.__pydantic_private__
        url = private.get("_data_url")
        if url is None:
            url = private["_data_url"] = f"data:{self.mime_type};base64,{self.b64()}"
        return url

    def __eq__(self, other: object) -> bool:  # the cached URL (a private attribute) is no part of equality
        if not isinstance(other, ImagePart):
            return NotImplemented
        return (self.sha256, self.key, self.format, self.width, self.height, self.data) == (
            other.sha256, other.key, other.format, other.width, other.height, other.data)


Part = Annotated[Union[TextPart, ImagePart], Field(discriminator="type")]
Role = Literal["system", "user", "assistant"]


class Message(BaseModel):
    role: Role
    content: list[Part]

    @classmethod
    def make(cls, role: Role, *items: str | Image.Image | ImagePart) -> "Message":
        return cls(role=role, content=[_part(item) for item in items])

    @classmethod
    def user(cls, *items: str | Image.Image | ImagePart) -> "Message":
        return cls.make("user", *items)

    @classmethod
    def system(cls, text: str) -> "Message":
        return cls.make("system", text)

    @classmethod
    def assistant(cls, text: str) -> "Message":
        return cls.make("assistant", text)

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.content if isinstance(p, TextPart))

    @property
    def images(self) -> list[ImagePart]:
        return [p for p in self.content if isinstance(p, ImagePart)]


def _part(item: str | Image.Image | ImagePart) -> TextPart | ImagePart:
    if isinstance(item, str):
        return TextPart(text=item)
    if isinstance(item, ImagePart):
        return item
    if isinstance(item, Image.Image):
        return ImagePart.from_pil(item)
    raise TypeError(f"unsupported message item {type(item).__name__}")


def canonical_messages(messages: list[Message], file_keys: bool = True) -> list[dict[str, Any]]:
    """JSON-able form used in cache keys and logs: images by hash (``file_sha256`` or ``sha256``, so the key
    records its kind), never bytes.  ``file_keys=False``: by pixels, as stores before key version 3 did."""
    return [{"role": m.role, "content": [_keyed(p, file_keys) for p in m.content]} for m in messages]


def _keyed(p: TextPart | ImagePart, file_keys: bool) -> dict[str, Any]:
    if isinstance(p, TextPart):
        return {"type": "text", "text": p.text}
    if p.key == "file" and file_keys:
        return {"type": "image", "file_sha256": p.sha256, "size": [p.width, p.height]}
    return {"type": "image", "sha256": p.pixel_sha256(), "size": [p.width, p.height]}


def to_openai(messages: list[Message]) -> list[dict[str, Any]]:
    """OpenAI chat-completions format (also vLLM, SGLang, Ollama, LM Studio, llama.cpp)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.images and m.role != "user":
            raise ValueError(f"images are only supported in user messages, not {m.role!r}")
        # turns without images are plain strings: some servers (llama.cpp, older vLLM) refuse content arrays there
        out.append({"role": m.role, "content": m.text if not m.images else [
            {"type": "text", "text": p.text} if isinstance(p, TextPart)
            else {"type": "image_url", "image_url": {"url": p.data_url()}} for p in m.content]})
    return out


def _system_split(messages: list[Message], image: Any, text: Any = lambda t: {"type": "text", "text": t}
                  ) -> tuple[str | None, list[tuple[Role, list[dict[str, Any]]]]]:
    """(the system turns' text, the other turns as (role, parts)): what Anthropic and Gemini both take."""
    system = "\n\n".join(m.text for m in messages if m.role == "system") or None
    turns = [(m.role, [text(p.text) if isinstance(p, TextPart) else image(p) for p in m.content])
             for m in messages if m.role != "system"]
    return system, turns


def to_anthropic(messages: list[Message]) -> tuple[str | None, list[dict[str, Any]]]:
    """Anthropic Messages format: (system prompt, messages)."""
    system, turns = _system_split(messages, lambda p: {
        "type": "image", "source": {"type": "base64", "media_type": p.mime_type, "data": p.b64()}})
    return system, [{"role": role, "content": parts} for role, parts in turns]


def to_gemini(messages: list[Message]) -> tuple[str | None, list[dict[str, Any]]]:
    """Gemini ``generateContent`` format, as its REST API takes it (images base64): (system instruction, contents)."""
    system, turns = _system_split(messages, lambda p: {"inline_data": {"mime_type": p.mime_type, "data": p.b64()}},
                                  lambda t: {"text": t})
    return system, [{"role": "model" if role == "assistant" else "user", "parts": parts} for role, parts in turns]


def to_hf(messages: list[Message]) -> tuple[list[dict[str, Any]], list[Image.Image]]:
    """Hugging Face chat-template format: (conversation, images in order of appearance)."""
    conversation = [{"role": m.role, "content": [{"type": "text", "text": p.text} if isinstance(p, TextPart)
                                                 else {"type": "image"} for p in m.content]} for m in messages]
    return conversation, [p.to_pil() for m in messages for p in m.images]
