"""A Hub snapshot whose only parquet shard is truncated ends in one sentence naming the file (pyarrow's own
sentence names none), on every route that reads it."""

from __future__ import annotations

import pytest

from vlmcheck.datasets import DatasetFormError, load


def test_a_truncated_only_shard_is_one_sentence_naming_the_file(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    snap = tmp_path / "snap"
    (snap / "data").mkdir(parents=True)
    (snap / "README.md").write_text("# a dataset\n")
    shard = snap / "data" / "test-00000-of-00001.parquet"
    pq.write_table(pa.table({"question": ["Is it red?"] * 50, "answer": ["yes"] * 50}), shard)
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    for source in (str(snap), f"hfds:{snap}"):
        with pytest.raises(DatasetFormError) as err:
            load(source)
        msg = str(err.value)
        assert msg.startswith(f"{shard}: not a readable parquet shard") and "\n" not in msg
