"""In-memory BM25 (lethe.text.analyzer, lethe.retrieval.bm25, baselines.bm25_memory) against Pyserini/Anserini/Lucene: analysis, norms, scores, rankings."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest

from baselines.bm25_memory import InMemoryBM25, anserini_adjust_ties
from lethe.core.protocol import Doc, Method, Query
from lethe.retrieval.bm25 import LENGTH_TABLE, BM25Index, byte4_to_int, encode_lengths, int_to_byte4
from lethe.text.analyzer import analyze, tokenize

# expected terms: Anserini 1.7.1's DefaultEnglishAnalyzer on the same strings (checked with
# pyserini.analysis.Analyzer(get_lucene_analyzer()))
ANALYZER_CASES = [
    ("John's car", ["john", "car"]),
    ("JOHN'S Caroline’s x＇s", ["john", "carolin", "x"]),  # possessive filter: ' ’ ＇
    ("it's that's", []),  # possessive removed, then stopwords
    ("don't they're o'neill", ["don't", "they'r", "o'neil"]),
    ("2000's 1990s", ["2000", "s", "1990"]),  # "'" joins digits only to digits
    ("10:30am Re:Hello a:b:c", ["10", "30am", "re:hello", "a:b:c"]),  # ':' joins letters only
    ("U.S.A. e.g. a.m. 3.14 1,000,000 1;2", ["u.s.a", "e.g", "a.m", "3.14", "1,000,000", "1;2"]),
    ("foo_bar _foo_ __ well-known", ["foo_bar", "_foo_", "well", "known"]),
    ("http://www.example.com/path?x=1 me@c.com", ["http", "www.example.com", "path", "x", "1", "me", "c.com"]),
    ("#hashtag @mention $100 50% 5pm 3rd", ["hashtag", "mention", "100", "50", "5pm", "3rd"]),
    ("naïve café İstanbul ΣΟΦΟΣ soft\u00adhyphen", ["naïv", "café", "istanbul", "σοφοσ", "soft\u00adhyphen"]),
    (
        "😀 hello 👍🏻 👨\u200d👩\u200d👧 ❤️ 1️⃣ 🇺🇸 © ★ ♪ hello😀world",
        ["😀", "hello", "👍🏻", "👨\u200d👩\u200d👧", "❤️", "1️⃣", "🇺🇸", "©", "★", "♪", "hello", "😀", "world"],
    ),
    ("日本語です カタカナ 한국어 ภาษาไทย", ["日", "本", "語", "で", "す", "カタカナ", "한국어", "ภาษาไทย"]),
    (
        "The a an and are as at be but by for if in into is it no not of on or such that the their then "
        "there these they this to was will with",
        [],
    ),  # Lucene's 33 English stopwords
    (
        "possibly generalization abilities hopping running logical archaeology",
        ["possibl", "gener", "abil", "hop", "run", "logic", "archaeolog"],
    ),
    ("us ies aed sky ion", ["us", "i", "a", "sky", "ion"]),  # Lucene's Porter: 1-2 letter words unstemmed
]


@pytest.mark.parametrize("text, expected", ANALYZER_CASES)
def test_analyzer_hand_picked(text, expected):
    assert analyze(text) == expected


def test_tokenizer_max_token_length():
    # StandardTokenizer: at most 255 UTF-16 units, the longest match inside that window
    assert [len(t) for t in tokenize("x" * 600)] == [255, 255, 90]
    assert [len(t) for t in tokenize("a" * 254 + ".b")] == [254, 1]
    assert [len(t) for t in tokenize("a" * 253 + ".b")] == [255]
    assert [len(t) for t in tokenize("_" * 300 + "a")] == [255]


def test_length_encoding():
    # SmallFloat.intToByte4 / byte4ToInt: exact below 24, then 4 significant bits
    assert [int_to_byte4(i) for i in range(24)] == list(range(24))
    assert [int_to_byte4(i) for i in (24, 25, 40, 100, 1000)] == [24, 25, 40, 57, 87]
    assert [byte4_to_int(b) for b in (24, 40, 57, 86, 87, 255)] == [24, 40, 96, 920, 984, 2013265944]
    for b in range(256):  # round trip, and intToByte4 rounds down
        assert int_to_byte4(byte4_to_int(b)) == b
    lengths = np.arange(5000)
    enc = encode_lengths(lengths)
    assert enc.tolist() == [int_to_byte4(int(i)) for i in lengths]
    assert np.all(LENGTH_TABLE[enc] <= lengths)


def test_empty_and_stopword_queries():
    m = InMemoryBM25()
    m.index([Doc("d1", "the cat sat", 0), Doc("d2", "a dog", 1)])
    assert m.search(Query(""), 10).ranking == []
    assert m.search(Query("the and of to"), 10).ranking == []
    assert m.search(Query("unicorn"), 10).ranking == []
    assert [d for d, _ in m.search(Query("cat"), 10).ranking] == ["d1"]


def test_zero_docs():
    m = InMemoryBM25()
    m.index([])
    res = m.search(Query("cat"), 10)
    assert res.ranking == [] and "search" in res.timings_ms
    idx = BM25Index().fit([])
    assert idx.score("cat").shape == (0,) and idx.score("cat").dtype == np.float32


def test_method_protocol_and_reindex():
    m = InMemoryBM25(k1=0.9, b=0.4)
    assert isinstance(m, Method)
    assert m.describe()["k1"] == 0.9 and m.describe()["b"] == 0.4
    docs = [Doc(f"d{i}", t, i) for i, t in enumerate(["cats and dogs", "dog", "a cat", "cat cat", "bird"])]
    m.index(docs[:2])
    m.index(docs)  # re-index a longer prefix (the runner's pattern): same as a fresh index
    fresh = InMemoryBM25(k1=0.9, b=0.4)
    fresh.index(docs)
    assert m.search(Query("cat dog"), 3).ranking == fresh.search(Query("cat dog"), 3).ranking
    r = m.search(Query("cat dog"), 10).ranking
    assert len(r) == 4 and all(a[1] >= b[1] for a, b in pairwise(r))


def test_anserini_tie_adjustment():
    # the example in Anserini's ScoreTiesAdjusterReranker
    got = anserini_adjust_ties(np.array([23.439316, 22.087432, 22.087432, 21.602508], np.float32))
    want = np.array([23.4393, 22.0874, np.float32(22.0874) - np.float32(1e-6), 21.6025], np.float32)
    assert got.tolist() == want.tolist()


def test_score_vector_for_reuse():
    idx = BM25Index().fit(["red apple", "green apple pie", "banana"])
    s = idx.score("apple apple")
    assert s.shape == (3,) and s.dtype == np.float32
    assert s[0] > s[1] > 0 and s[2] == 0
    assert np.array_equal(idx.score("apple apple"), idx.score_terms(["appl", "appl"]))


# ---- against the JVM (Pyserini 1.6.0: Anserini 1.7.1, Lucene 9.9.1) --------------------------


@pytest.fixture(scope="module")
def jvm():
    from baselines.pyserini_jvm import ensure_jvm

    ensure_jvm()
    from jnius import autoclass

    return autoclass


class LuceneRaw:
    """Raw Lucene BM25 scores of an Anserini index (no Anserini rounding): {doc id: float32}."""

    def __init__(self, autoclass, path, k1=1.2, b=0.75):
        File = autoclass("java.io.File")
        reader = autoclass("org.apache.lucene.index.DirectoryReader").open(
            autoclass("org.apache.lucene.store.FSDirectory").open(File(str(path)).toPath())
        )
        self.searcher = autoclass("org.apache.lucene.search.IndexSearcher")(reader.getContext())
        self.searcher.setSimilarity(autoclass("org.apache.lucene.search.similarities.BM25Similarity")(k1, b))
        self.analyzer = autoclass("io.anserini.analysis.DefaultEnglishAnalyzer").newDefaultInstance()
        self.generator = autoclass("io.anserini.search.query.BagOfWordsQueryGenerator")()
        fields = reader.storedFields()
        self.ids = [fields.document(i).get("id") for i in range(reader.maxDoc())]

    def scores(self, query: str) -> dict[str, float]:
        q = self.generator.buildQuery("contents", self.analyzer, query)
        return {self.ids[sd.doc]: sd.score for sd in self.searcher.search(q, max(1, len(self.ids))).scoreDocs}


TINY = [
    "The cat sat on the mat.",
    "A dog and a cat",
    "the and of",
    "cats cats cats chasing mice",
    "dog " * 40 + "cat",
    "Nothing here",
    "Mice are small; the cat likes mice",
    "cat",
    "cat",
    "zebra",
    "",
    "dog " * 3000 + "mice",
    "Caroline's café ★ 😀 naïve",
]
TINY_QUERIES = [
    "cat",
    "cat cat",
    "cat cat cat dog",
    "cat dog mice",
    "the",
    "",
    "dogs chasing the cats",
    "zebra cat cat mice",
    "mice mice dog",
    "Caroline café ★ 😀",
]


def test_lucene_length_encoding(jvm):
    small_float = jvm("org.apache.lucene.util.SmallFloat")
    for i in list(range(3000)) + [10**5, 10**6, 2**31 - 1]:
        assert int_to_byte4(i) == small_float.intToByte4(i) & 0xFF
    for b in range(256):
        assert byte4_to_int(b) == small_float.byte4ToInt(b - 256 if b > 127 else b)


def test_scores_equal_lucene_tiny(jvm, tmp_path):
    from baselines.bm25 import PyseriniBM25

    docs = [Doc(f"d{i}", t, i) for i, t in enumerate(TINY)]
    for k1, b in [(1.2, 0.75), (0.9, 0.4)]:
        py = PyseriniBM25(k1=k1, b=b, cache_dir=tmp_path)
        py.index(docs)
        raw = LuceneRaw(jvm, py._index_dir(docs), k1, b)
        mem, idx = InMemoryBM25(k1=k1, b=b), BM25Index(k1, b).fit(TINY)
        mem.index(docs)
        for q in TINY_QUERIES:
            ref = raw.scores(q)
            want = np.array([ref.get(d.doc_id, 0.0) for d in docs], np.float32)
            got = idx.score(q)
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
            assert np.array_equal(got, want), q  # in fact bit for bit
            # what Pyserini returns (Anserini's rounded, tie-adjusted scores) equals our ranking
            assert mem.search(Query(q), 20).ranking == py.search(Query(q), 20).ranking, q
        py.close()


@pytest.mark.slow
def test_analyzer_equals_anserini_every_code_point(jvm):
    """Every BMP code point and the emoji blocks, in contexts that reveal its word-break class.

    Guards the Unicode 9 corrections against a change of the regex module's Unicode data.
    """
    from pyserini.analysis import Analyzer, get_lucene_analyzer

    anserini = Analyzer(get_lucene_analyzer())
    template = "a{0}b 1{0}2 {0}{0} x{0} {0}y 😀{0}😀 {0}\u200d😀 ח{0}ח"
    cps = [c for c in list(range(0x10000)) + list(range(0x1F000, 0x1FC00)) if not 0xD800 <= c <= 0xDFFF]
    bad = []
    for i in range(0, len(cps), 512):
        text = " ".join(template.format(chr(c)) for c in cps[i : i + 512])
        if analyze(text) != list(anserini.analyze(text)):
            bad.append(hex(cps[i]))
    assert bad == []


def test_analyzer_equals_anserini_on_locomo(jvm, cfg_for):
    from pyserini.analysis import Analyzer, get_lucene_analyzer

    from experiments.datasets import prepare_dataset
    from lethebench.schema import read_dataset

    ds = read_dataset(prepare_dataset(cfg_for("dataset=locomo")))
    anserini = Analyzer(get_lucene_analyzer())
    texts = list(ds.corpus.text) + list(ds.queries.text)
    bad = [t for t in texts if analyze(t) != list(anserini.analyze(t))]
    assert len(texts) > 7000 and bad == []


def test_locomo_agrees_with_pyserini(jvm, cfg_for):
    """Acceptance: all 10 LoCoMo conversations, every question, k=10, one index per conversation."""
    from baselines.bm25 import PyseriniBM25
    from experiments.datasets import prepare_dataset
    from lethebench.schema import read_dataset

    ds = read_dataset(prepare_dataset(cfg_for("dataset=locomo")))
    corpus = ds.corpus.sort_values(["scope_id", "position", "doc_id"], kind="stable")
    py, mem = PyseriniBM25(cache_dir=None), InMemoryBM25()
    k, overlaps, top1, identical = 10, [], 0, 0
    for scope, grp in corpus.groupby("scope_id", sort=True):
        docs = [Doc(r.doc_id, r.text, int(r.position)) for r in grp.itertuples(index=False)]
        py.index(docs)
        mem.index(docs)
        for text in ds.queries.loc[ds.queries.scope_id == scope, "text"]:
            a, b = py.search(Query(text), k).ranking, mem.search(Query(text), k).ranking
            ids_a, ids_b = [d for d, _ in a], [d for d, _ in b]
            overlaps.append(len(set(ids_a) & set(ids_b)) / len(ids_a) if ids_a else float(not ids_b))
            top1 += ids_a[:1] == ids_b[:1]
            identical += a == b
    py.close()
    n = len(overlaps)
    assert corpus.scope_id.nunique() == 10 and n == len(ds.queries) == 1986
    assert np.mean(overlaps) >= 0.99
    assert top1 / n >= 0.99
    assert identical / n >= 0.99  # same docs, order and (Anserini-rounded) scores


def test_set_idf_with_own_statistics_is_identity_and_corpus_stats_change_weights():
    texts = ["the daemon crashed on port 8080", "restart the daemon", "port 9090 is free now", "all tests pass"]
    idx = BM25Index().fit(texts)
    own_df = {t: int(idx.indptr[i + 1] - idx.indptr[i]) for t, i in idx.vocab.items()}
    before = idx.score("daemon port").copy()
    assert np.array_equal(idx.set_idf(own_df, idx.doc_count).score("daemon port"), before)
    # in a larger collection where 'daemon' is everywhere, it weighs less than 'port'
    idx.set_idf({**own_df, "daemon": 100, "port": 2}, 100)
    s = idx.score("daemon")
    assert s.max() < before.max() and idx.idf[idx.vocab["daemon"]] < idx.idf[idx.vocab["port"]]
