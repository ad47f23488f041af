"""Close the VHExpansion loop (paper section 5.4): training data from expanded cases (:mod:`.data`), LoRA
fine-tuning (:mod:`.train`), and before/after comparison (:mod:`.compare`)."""

from .compare import compare_vhx
from .data import build_dataset

__all__ = ["build_dataset", "compare_vhx"]
