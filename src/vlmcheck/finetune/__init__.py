"""Close the VHExpansion loop (paper section 5.4): training data from expanded cases (:mod:`.data`), LoRA
fine-tuning (:mod:`.train`), and before/after comparison (:mod:`.compare`)."""
