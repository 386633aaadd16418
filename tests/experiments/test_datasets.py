"""A dataset given as a folder (dataset=custom) is identified by its content: edited in place it is refused
until its card records the new hashes, and then it has a new key, so its runs get a new config hash."""

from __future__ import annotations

import pandas as pd
import pytest

from experiments.datasets import dataset_build_key, dataset_key, prepare_dataset
from lethebench.schema import DatasetError, read_dataset, update_card_hashes, write_dataset
from tests.support.toy import toy_dataset


def test_custom_folder_key_follows_its_content(tmp_path, cfg_for):
    folder = write_dataset(toy_dataset(), tmp_path / "toy")
    cfg = cfg_for("dataset=custom", "dataset.name=toy", f"dataset.folder={folder}")
    key = dataset_build_key(cfg)
    ds = read_dataset(prepare_dataset(cfg), "toy")
    assert dataset_key(cfg, folder, ds) == key and key.endswith("+" + ds.content_sha256[:16])

    corpus = pd.read_parquet(folder / "corpus.parquet")
    corpus.loc[0, "text"] = "edited in place"
    corpus.to_parquet(folder / "corpus.parquet", index=False)
    # used to keep the old key: the run was skipped as already done, on other data
    with pytest.raises(DatasetError, match=r"toy/corpus\.parquet: content changed"):
        dataset_build_key(cfg)
    with pytest.raises(DatasetError, match=r"toy/corpus\.parquet: content changed"):
        read_dataset(folder, "toy")

    update_card_hashes(folder)
    new = dataset_build_key(cfg)
    assert new != key
    assert dataset_key(cfg, folder, read_dataset(folder, "toy")) == new
