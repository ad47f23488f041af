"""``ref:describer``: a reference VLM that sees only pixels (docs/world.md: what it answers, its error knobs).

It perceives a world scene with :func:`~vlmcheck.world.perceive.perceive` (never the scene graph), applies its
error knobs to what it saw, and answers from that belief, with confidences taken from the perception margins (so
errors made by the knobs stay confidently wrong, as in real models). On a photograph it falls back to
EfficientNet-Lite0 labels, OCR text and dominant colours; a request it does not understand it says so.

Split by job: ``knobs.py`` (what it believes it saw), ``answering.py`` (answering each kind of question, and
without the image), ``similarity.py`` (CAST), this module (requests in, text and likelihoods out).
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import math
import re

from PIL import Image

from ..core.images import BoundedCache, image_hash, to_rgb
from ..core.messages import ImagePart, Message
from ..core.roles import Capabilities, Generation, GenerationConfig, Loglikelihood
from ..core.spec import ModelSpec
from . import language as lang
from .perceive import perceive, read_photo_text
from .ref_models import RefModel, describe_photo, generation
from .answering import Answer, WorldAnswerer, _option_matches, blind_answer, soft_match
from .knobs import Knobs, _uniforms, apply_knobs
from .scene import Scene, object_box
from .similarity import _CAST_FORMATS, _CAST_GEN, _CAST_WORDS, similarities, statement_holds


#: What was perceived in an image, by the image's key (the pixels are needed only to perceive it, never to find
#: it: a functools.lru_cache key would hold them, hashed on every lookup).
_PERCEPTIONS = BoundedCache(512)
_KEY = "_vlmcheck_key"  # an attribute of a request's decoded image: the key its part was sent with
_UNSEEN = object()


#: Request images decoded once, by their part's key, within 128 MB of pixels (a 4000-px photo is 48 MB): CAST
#: sends one image in up to 100 requests; VHExpansion and ChEF one per question.  Each is shared: whoever
#: reads it makes new images (crop, convert), never changes it.
_DECODED = BoundedCache(128 * 1024 * 1024, lambda img: img.width * img.height * 3)


def _decoded(part: ImagePart) -> Image.Image:
    key = f"{part.key}:{part.sha256}"
    img = _DECODED.get(key)
    if img is None:
        img = Image.open(io.BytesIO(part.data))
        img.load()
        img = to_rgb(img)  # as ImagePart.to_pil
        setattr(img, _KEY, key)  # not copied by crop() or convert(): a derived image is keyed by its own pixels
        _DECODED.put(key, img)
    return img


class RefDescriber(RefModel):
    """The ``ref:describer`` VLM (see module docstring)."""

    name, capabilities = "describer", Capabilities(multi_image=True, loglikelihood=True, seeded=True)

    def __init__(self, spec: ModelSpec | None = None) -> None:
        self.knobs = Knobs.from_params(dict(spec.params) if spec else {})
        # robust=1: also read corrupted scenes (perceive_degraded); such a describer may take a photograph's
        # coloured regions for a scene's objects, so it is a knob, off by default
        self.robust = spec.get_bool("robust", False) if spec else False
        super().__init__(spec)

    def _see(self, img: Image.Image) -> WorldAnswerer | None:
        """What it believes ``img`` shows (``.b``), ready to answer questions; None for a photograph."""
        key = (getattr(img, _KEY, None) or f"pixels:{image_hash(img.convert('RGB'))}", self.robust)
        p = _PERCEPTIONS.get(key, _UNSEEN)
        if p is _UNSEEN:  # two threads may both perceive it: the same reading
            p = perceive(img.convert("RGB"), robust=self.robust)
            _PERCEPTIONS.put(key, p)
        if p is None:
            return None
        # errors are drawn per perceived content, not per pixel hash: a perturbed copy that looks the same
        # to the describer gets the same errors, so perturbations only add the errors they cause
        content = hashlib.sha256(repr(p.scene.key()).encode()).hexdigest()
        belief, conf = apply_knobs(p, self.knobs, content)
        return WorldAnswerer(belief, conf, p.text_confidence, self.knobs, content, p.degraded)

    async def generate(self, messages: list[Message], config: GenerationConfig) -> Generation:
        text = await asyncio.to_thread(self._respond, messages)
        prompt_tokens = sum(len(m.text.split()) + 64 * len(m.images) for m in messages)
        return generation(text, config.max_tokens, prompt_tokens)

    async def loglikelihood(self, messages: list[Message], continuations: list[str]) -> list[Loglikelihood]:
        return await asyncio.to_thread(self._loglikelihood, messages, continuations)

    def _request(self, messages: list[Message]) -> tuple[str, list[Image.Image]]:
        users = [m for m in messages if m.role == "user"]
        if not users:
            return "", []
        # the images of the last turn that has any: they may sit in an earlier turn of the same conversation
        shown = [m for m in users if m.images]
        return users[-1].text, [_decoded(im) for im in shown[-1].images] if shown else []

    def _respond(self, messages: list[Message]) -> str:
        prompt, images = self._request(messages)
        fmt = next((name for name, rx in _CAST_FORMATS.items() if rx.search(prompt)), None)
        if fmt is not None:
            return self._cast_validate(prompt, images, fmt)
        if _CAST_GEN.search(prompt) and re.search(r"\b(two|both|scenes|images|descriptions)\b", prompt, re.I):
            return self._cast_generate(prompt, images)
        if not images:  # asked blind (the blind control): its language prior only
            return blind_answer(prompt, self.knobs)
        seen, q = self._see(images[-1]), lang.parse_question(prompt)
        if seen is None:  # a photograph: it can only describe it
            if q.kind != "describe":
                return "I cannot answer this question about a photograph; I can only describe it."
            words = read_photo_text(images[-1])
            return describe_photo(images[-1]) + (f' Text visible in the image: "{words}".' if words else "")
        ans = seen.answer(q, prompt)
        if not q.options:
            return ans.text
        # the first option that agrees with the answer's value, or ('which of these ...') that holds as a claim
        hits = [(letter, opt) for letter, opt in q.options if _option_matches(ans, opt)]
        if not hits and ans.value is None:
            hits = [(letter, opt) for letter, opt in q.options if statement_holds(opt, seen.b)]
        return f"{hits[0][0]}. {hits[0][1]}" if hits else "None of the options matches what I see."

    def _loglikelihood(self, messages: list[Message], continuations: list[str]) -> list[Loglikelihood]:
        prompt, images = self._request(messages)
        if not images:  # asked blind: the continuation its language prior says ("Yes"/"No"), at a guess's confidence
            said = blind_answer(prompt, self.knobs).rstrip(".").lower()
            if said in ("yes", "no"):
                matched = [c.strip().rstrip(".").lower() == said for c in continuations]
                return _scores(continuations, matched, Answer(said, said, 0.55, "yesno"))
        q = lang.parse_question(prompt)
        seen = self._see(images[-1]) if images else None
        turn = _turn_kind(prompt)
        if seen is not None and turn is not None:  # ChEF's detection and hierarchy turns
            matched = [_turn_match(turn, prompt, c, seen.b) for c in continuations]
            return _scores(continuations, matched, Answer("", None, 0.85, "claim"))
        ans = seen.answer(q, prompt) if seen is not None and q.kind != "describe" else None
        letters = dict(q.options)
        by_claim = ans is not None and ans.value is None and bool(q.options)
        if by_claim:  # "which of these ...": options read as claims
            ans = Answer("", None, 0.85, "claim")
        targets = []
        for cont in continuations:
            c = re.sub(r"^(the )?answer is:?\s*", "", cont.strip(), flags=re.I)
            m = re.fullmatch(r"\(?([A-Z])(?:[\.\)]\s*.*)?", c)  # "B" or "B. text": the option labelled B
            targets.append(letters.get(m.group(1), c) if m else c)
        if ans is None:
            matched = [False] * len(targets)
        elif by_claim:
            matched = [bool(statement_holds(target, seen.b)) for target in targets]
        else:
            matched = [_option_matches(ans, target) for target in targets]
        if by_claim and seen.soft and not any(matched):
            matched, ans = _closest_claims(targets, seen.b), Answer("", None, 0.6, "claim")
        return _scores(continuations, matched, ans)

    def _two_scenes(self, prompt: str, images: list[Image.Image]) -> list[Scene | None]:
        """The two scenes a CAST request compares, from its descriptions or its images, or (both given) what
        either shows; fewer than two, or None for one not made out, when it does not hold two."""
        texts = re.findall(r"(?:scene|description|image)\s*(?:1|2|one|two|a|b)\s*:\s*(.+?)(?=(?:\n\s*(?:scene|"
                           r"description|image)\s*(?:1|2|one|two|a|b)\s*:)|\n\s*statement\s*:|\Z)",
                           prompt, re.I | re.S)
        parsed = (lang.parse_description(t)[0] for t in texts[:2])
        text_scenes: list[Scene | None] = [s if (s.objects or s.text) else None for s in parsed]
        if len(images) == 1 and images[0].width >= 1.8 * images[0].height:  # side by side in one image
            im, half = images[0], images[0].width // 2
            images = [im.crop((0, 0, half, im.height)), im.crop((im.width - half, 0, im.width, im.height))]
        image_scenes = [seen.b if (seen := self._see(im)) else None for im in images[:2]]
        if len(text_scenes) == 2 and len(image_scenes) == 2 and all(text_scenes):
            # both modalities: what the descriptions say, plus what the images show
            return [_union(t, i) for t, i in zip(text_scenes, image_scenes)]
        return image_scenes if len(image_scenes) == 2 else text_scenes

    def _cast_generate(self, prompt: str, images: list[Image.Image]) -> str:
        scenes = self._two_scenes(prompt, images)
        if len(scenes) != 2 or any(s is None for s in scenes):
            return "I cannot make out two scenes to compare."
        sims = similarities(*scenes)
        if not sims:
            return "The two scenes have nothing in common."
        return "\n".join(f"{i}. {s}" for i, s in enumerate(sims, 1))

    def _cast_validate(self, prompt: str, images: list[Image.Image], fmt: str) -> str:
        m = re.search(r"statement\s*:\s*(.+?)(?:\n|$)", prompt, re.I)
        if not m:
            return "I cannot find the statement to check."
        statement, (pos, neg) = m.group(1).strip(), _CAST_WORDS[fmt]
        scenes = self._two_scenes(prompt, images)
        if not images and not scenes:  # asked blind: its prior only, a coin at its base rate of yes
            p_yes = 0.5 + self.knobs.yes_bias / 2
            return pos if _uniforms(self.knobs.seed, "cast-blind", statement.lower(), fmt).random() < p_yes else neg
        if len(scenes) != 2 or any(s is None for s in scenes):
            return "I cannot make out two scenes to compare."
        verdicts = [statement_holds(statement, s) for s in scenes]
        if any(v is None for v in verdicts):
            return "I am not sure what this statement means."
        both = all(verdicts)
        if not both and self.knobs.yes_bias > 0:
            u = _uniforms(self.knobs.seed, "cast", statement.lower(), prompt[:200]).random()
            both = u < self.knobs.yes_bias
        return pos if both else neg


def _scores(continuations: list[str], matched: list[bool], ans: Answer | None) -> list[Loglikelihood]:
    """The answer's confidence shared by the matching continuations, the rest by the others; uniform when
    all or none match.  Per-token log-probabilities, so the mean is the continuation's log-probability."""
    k = len(continuations)
    n_match = sum(matched)
    out = []
    for cont, hit in zip(continuations, matched):
        if n_match == 0 or n_match == k:
            p = 1.0 / k
        elif hit:
            p = ans.confidence / n_match
        else:
            p = (1.0 - ans.confidence) / (k - n_match)
        n_tok = max(1, len(lang.words(cont)))
        out.append(Loglikelihood(sum=math.log(max(p, 1e-9)) * n_tok, n_tokens=n_tok))
    return out


def _closest_claims(claims: list[str], belief: Scene) -> list[bool]:
    """For a degraded reading: the claims ("pink circle") closest to some object seen (:func:`soft_match`)."""
    scores = []
    for c in claims:
        phrases = [p for p in lang.object_phrases(c.lower()) if not p.negated]
        scores.append(max((soft_match(phrases[0], None, o) for o in belief.objects), default=0.0) if phrases else 0.0)
    best = max(scores, default=0.0)
    return [best > 0 and s == best for s in scores]


_BOX_TURN = re.compile(r"bounding boxes of (.+?) in the image", re.I)
_CLAIM_PREFIX = re.compile(r"^(the image shows|the fine-grained category label for this image is|it is)\s*", re.I)


def _turn_kind(prompt: str) -> str | None:
    """ChEF turn prompts (chef/turns.py): a detection category turn or hierarchy level ("claim"), a box turn."""
    p = prompt.strip().lower()
    if _BOX_TURN.search(prompt):
        return "box"
    if p == "the image shows" or "category label" in p:
        return "claim"
    return None


def _turn_match(kind: str, prompt: str, continuation: str, belief: Scene) -> bool:
    if kind == "claim":  # "The image shows a circle" / "... label for this image is red circle"
        return bool(statement_holds(_CLAIM_PREFIX.sub("", continuation.strip()), belief))
    from ..metrics.stats import iou

    label = _BOX_TURN.search(prompt).group(1)
    phrases = lang.object_phrases(label.lower())
    nums = [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?", continuation)]
    if len(nums) != 4 or not phrases:
        return False
    mine = [object_box(o) for o in belief.objects if phrases[0].matches(o)]
    return any(iou(b, nums) > 0.5 for b in mine)


def _union(a: Scene | None, b: Scene | None) -> Scene:
    """What either source shows (text first)."""
    if a is None:
        return b or Scene()
    if b is None:
        return a
    cells = {(o.row, o.col): o for o in b.objects}
    cells.update({(o.row, o.col): o for o in a.objects})
    return Scene(background=a.background, objects=[cells[k] for k in sorted(cells)], text=a.text or b.text)
