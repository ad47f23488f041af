"""lmms-eval task functions for bench/api_throughput.py --peers: one describe request per image file, as its
image tasks do (the file opened with PIL and converted to RGB; lmms-eval's openai model encodes it)."""

from PIL import Image

PROMPT = "Describe this image in detail."


def doc_to_visual(doc):
    return [Image.open(doc["path"]).convert("RGB")]


def doc_to_text(doc):
    return PROMPT


def process_results(doc, results):
    return {"answered": float(bool(results and results[0]))}
