"""Hand-computed checks of the LoCoMo-style answer metrics in analysis.answers; the stemmer is NLTK's
(LoCoMo's own), and ROUGE-L is cross-checked against Google's rouge-score on real LoCoMo answers."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
from nltk.stem import PorterStemmer
from rouge_score import rouge_scorer
from rouge_score import tokenize as rouge_tokenize

from analysis import answers as A
from analysis.answers import (
    CATEGORIES,
    exact_match,
    multi_answer_f1,
    normalize_answer,
    rouge_l,
    score_answer,
    token_f1,
)
from lethe.text.analyzer import porter_stem
from lethebench.loaders.locomo import CATEGORY_MAP


def test_category_names_match_loader_map():
    assert set(CATEGORIES) == set(CATEGORY_MAP.values())


# --- normalization -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, expected",
    [
        # ',' dropped, lowercased, '!' dropped, "the"/"and"/"a" dropped, spaces collapsed
        ("The Cat, and a Hat!", "cat hat"),
        ("1,000 dollars", "1000 dollars"),  # ',' removed before anything else
        ("An apple.", "apple"),
        ("Band Theatre", "band theatre"),  # only whole words: "and" in "band", "the" in "theatre" stay
        ("Don't   stop", "dont stop"),  # apostrophe removed, whitespace collapsed
        ("  the  ", ""),
    ],
)
def test_normalize_answer(raw, expected):
    assert normalize_answer(raw) == expected


# --- token F1 ------------------------------------------------------------------------------------


def test_token_f1_partial_overlap_brief_example():
    # pred -> "cat sat on mat" -> [cat, sat, on, mat]          (4 tokens)
    # gold -> "cat was on mat" -> [cat, wa, on, mat]           (4 tokens; Porter: was -> wa)
    # common = {cat, on, mat} = 3; P = 3/4, R = 3/4; F1 = 2*(9/16)/(6/4) = 0.75
    assert token_f1("the cat sat on the mat", "a cat was on a mat") == pytest.approx(0.75)


def test_token_f1_partial_overlap_asymmetric():
    # pred [cat, sat, on, mat] (4); gold [cat, wa, on, red, mat] (5); common 3
    # P = 3/4, R = 3/5; F1 = 2*0.45/1.35 = 2/3
    assert token_f1("the cat sat on the mat", "a cat was on a red mat") == pytest.approx(2 / 3)


def test_token_f1_counts_repeats_as_multiset():
    # pred [cat, cat] (2); gold [cat] (1); common = min(2, 1) = 1; P = 1/2, R = 1; F1 = 1/(3/2) = 2/3
    assert token_f1("cat cat", "cat") == pytest.approx(2 / 3)
    # pred [cat, cat] (2); gold [cat, cat, dog] (3); common = min(2, 2) = 2; P = 1, R = 2/3; F1 = (4/3)/(5/3) = 0.8
    # (a set intersection would give common 1: P = 1/2, R = 1/3, F1 = 0.4)
    assert token_f1("cat cat", "cat cat dog") == pytest.approx(0.8)


def test_token_f1_stemming():
    # running -> run, runs -> run: identical single tokens -> 1.0 (0.0 without stemming)
    assert token_f1("running", "runs") == 1.0
    # pred [he, run, daili] (3); gold [run, daili] (2); common 2; P = 2/3, R = 1; F1 = (4/3)/(5/3) = 0.8
    assert token_f1("He runs daily", "running daily") == pytest.approx(0.8)


@pytest.mark.parametrize(
    "pred, gold, f1, original_porter_f1",
    [
        # NLTK: dying -> die, die -> die: [die] vs [die] -> 1.0.  Original Porter: [dy] vs [die] -> 0.0
        ("dying", "die", 1.0, 0.0),
        # NLTK: [clear, sky] vs [sky]: common 1, P = 1/2, R = 1 -> 2/3.  Original: [clear, ski] vs [sky] -> 0.0
        ("clear skies", "sky", 2 / 3, 0.0),
        # NLTK strips "fully": [hope] vs [hope] -> 1.0.  Original: [hopefulli] vs [hope] -> 0.0
        ("hopefully", "hope", 1.0, 0.0),
        # NLTK: [turtl, is, lie, down] (4) vs [lie, down] (2): common 2, P = 1/2, R = 1 -> 2/3.
        # Original: [turtl, is, ly, down] vs [lie, down]: common 1, P = 1/4, R = 1/2 -> 1/3
        ("The turtle is lying down", "lie down", 2 / 3, 1 / 3),
        # NLTK keeps "one" (a LoCoMo gold word) apart from "on": 0.0.  Original: one -> on: [on] vs [on] -> 1.0
        ("one", "on", 0.0, 1.0),
        # NLTK keeps "news": [news] vs [new] -> 0.0.  Original: news -> new -> 1.0
        ("news", "new", 0.0, 1.0),
    ],
)
def test_token_f1_stems_as_nltk_not_original_porter(pred, gold, f1, original_porter_f1):
    """LoCoMo's f1_score stems with nltk's PorterStemmer() (mode NLTK_EXTENSIONS); on these words it departs
    from the original algorithm (lethe.text.analyzer.porter_stem, which this module used before)."""
    assert token_f1(pred, gold) == pytest.approx(f1)
    assert rouge_l(pred, gold) == pytest.approx(f1)  # the shared tokens are in the same order: LCS = common
    # the hand-computed columns, recomputed with each stemmer (F1 = 2 common / (|pred| + |gold|))
    assert _f1_stemmed_with(PorterStemmer().stem, pred, gold) == pytest.approx(f1)
    assert _f1_stemmed_with(porter_stem, pred, gold) == pytest.approx(original_porter_f1)


def _f1_stemmed_with(stem, pred: str, gold: str) -> float:
    pt, gt = ([stem(w) for w in normalize_answer(x).split()] for x in (pred, gold))
    return 2 * sum((Counter(pt) & Counter(gt)).values()) / (len(pt) + len(gt))


def test_token_f1_punctuation_and_articles_ignored():
    # both normalize to "eiffel tower"
    assert token_f1("The Eiffel Tower!", "eiffel tower") == 1.0
    assert token_f1("cats and dogs", "cats, dogs.") == 1.0


@pytest.mark.parametrize(
    "pred, gold",
    [
        ("", ""),  # both empty: defined as 0.0 (LoCoMo returns 0 when nothing is shared)
        ("the", "a"),  # both empty after normalization
        ("", "cat"),
        ("cat", ""),
        ("dog", "cat"),  # no overlap
    ],
)
def test_token_f1_empty_and_disjoint_are_zero(pred, gold):
    assert token_f1(pred, gold) == 0.0


# --- multi-answer F1 -----------------------------------------------------------------------------


def test_multi_answer_f1_two_part_gold():
    # gold parts ["Paris", "London"]; pred parts ["London"]
    # Paris: best F1 vs "London" = 0;  London: 1.0;  mean = (0 + 1)/2 = 0.5
    assert multi_answer_f1("London", "Paris, London") == pytest.approx(0.5)
    # plain token F1 differs: pred [london] (1), gold [pari, london] (2), common 1: P=1, R=1/2, F1 = 2/3
    assert token_f1("London", "Paris, London") == pytest.approx(2 / 3)


def test_multi_answer_f1_best_prediction_part():
    # pred parts ["visited Paris" -> [visit, pari], "London" -> [london]]
    # gold "Paris" [pari]: vs part 1 common 1, P=1/2, R=1 -> 2/3; vs part 2 -> 0; best 2/3
    # gold "London": vs part 2 -> 1.0
    # mean = (2/3 + 1)/2 = 5/6
    assert multi_answer_f1("visited Paris, London", "Paris, London") == pytest.approx(5 / 6)


# --- ROUGE-L -------------------------------------------------------------------------------------


def test_rouge_l_order_matters_unlike_bag_of_words():
    # pred [mat, on, cat], gold [cat, on, mat]: bag overlap is complete -> token F1 = 1.0
    assert token_f1("mat on cat", "cat on mat") == 1.0
    # LCS: no two tokens appear in the same order in both -> LCS = 1; P = R = 1/3; F = 1/3
    assert rouge_l("mat on cat", "cat on mat") == pytest.approx(1 / 3)
    # pred [cat, sat, mat], gold [cat, mat, sat]: LCS = 2 ("cat sat" or "cat mat"); P = R = 2/3; F = 2/3
    assert rouge_l("cat sat mat", "cat mat sat") == pytest.approx(2 / 3)


def test_rouge_l_partial_and_identity():
    # pred [cat, sat, on, mat] (4), gold [cat, wa, on, red, mat] (5): LCS = cat,on,mat = 3
    # P = 3/4, R = 3/5, F = 2/3
    assert rouge_l("the cat sat on the mat", "a cat was on a red mat") == pytest.approx(2 / 3)
    # stemmed + normalized tokens identical -> 1.0
    assert rouge_l("The cats are running.", "cat are runs") == 1.0


@pytest.mark.parametrize("pred, gold", [("", ""), ("", "cat"), ("cat", ""), ("dog", "cat")])
def test_rouge_l_empty_and_disjoint_are_zero(pred, gold):
    assert rouge_l(pred, gold) == 0.0


# --- exact match ---------------------------------------------------------------------------------


def test_exact_match():
    assert exact_match("The Eiffel Tower.", "eiffel tower") == 1.0
    assert exact_match("tower eiffel", "eiffel tower") == 0.0  # order matters (LoCoMo's set-EM would say 1)
    assert exact_match("running", "runs") == 0.0  # no stemming in EM
    assert exact_match("", "") == 1.0  # both empty: equal strings
    assert exact_match("The", "") == 1.0  # "the" normalizes to ""
    assert exact_match("cat", "") == 0.0


# --- per-category scoring ------------------------------------------------------------------------


def test_score_answer_multi_hop_uses_multi_answer_f1():
    s = score_answer("London", "Paris, London", "multi-hop")
    assert s["f1"] == pytest.approx(0.5)
    # ROUGE-L on whole strings: [london] vs [pari, london], LCS 1, P = 1, R = 1/2 -> 2/3
    assert s["rouge_l"] == pytest.approx(2 / 3)
    assert s["em"] == 0.0
    # the same pair under single-hop uses plain token F1 = 2/3
    assert score_answer("London", "Paris, London", "single-hop")["f1"] == pytest.approx(2 / 3)


def test_score_answer_open_domain_uses_first_semicolon_part():
    # open-domain: gold cut to "Psychology" -> [psycholog]; pred [psycholog] -> all 1.0
    assert score_answer("psychology", "Psychology; counseling", "open-domain") == {"f1": 1.0, "rouge_l": 1.0, "em": 1.0}
    # other categories keep the whole gold [psycholog, counsel]: P = 1, R = 1/2, F1 = 2/3
    s = score_answer("psychology", "Psychology; counseling", "temporal")
    assert s["f1"] == pytest.approx(2 / 3)
    assert s["em"] == 0.0


@pytest.mark.parametrize(
    "pred, expected",
    [
        ("That is not mentioned in the conversation.", 1.0),
        ("No information available.", 1.0),
        ("NOT MENTIONED", 1.0),  # case-insensitive
        ("I don't know.", 0.0),  # not one of the two phrases
        ("There is no information about that.", 0.0),  # "no information" alone is not enough
        ("not  mentioned", 0.0),  # raw substring: two spaces do not match
        ("Sweden", 0.0),  # answering the adversarial question fails
    ],
)
def test_score_answer_adversarial_abstention(pred, expected):
    assert score_answer(pred, "Sweden", "adversarial") == {"f1": expected, "rouge_l": expected, "em": expected}


def test_score_answer_no_category_is_plain_token_f1():
    s = score_answer("not mentioned", "Sweden", None)
    assert s == {"f1": 0.0, "rouge_l": 0.0, "em": 0.0}
    assert score_answer("the cat sat on the mat", "a cat was on a mat", None)["f1"] == pytest.approx(0.75)


@pytest.mark.parametrize("bad", ["5", "Adversarial", "multi_hop", "inferential"])
def test_score_answer_unknown_category(bad):
    with pytest.raises(ValueError):
        score_answer("x", "y", bad)


# --- ROUGE-L against rouge-score on real LoCoMo answers -------------------------------------------


@pytest.fixture(scope="module")
def locomo_pairs(locomo_path) -> list[tuple[str, str]]:
    """(prediction, gold) pairs from real LoCoMo text: each question's gold answer (``adversarial_answer``
    for category 5) and, as the prediction, the text of its first evidence turn found as written (what an
    extractive answer from the right turn would say)."""
    pairs = []
    for conv in json.loads(locomo_path.read_text()):
        turns = {t["dia_id"]: t["text"] for v in conv["conversation"].values() if isinstance(v, list) for t in v}
        for qa in conv["qa"]:
            turn = next((turns[e.strip()] for e in qa["evidence"] if e.strip() in turns), None)
            if turn is not None:
                pairs.append((turn, str(qa.get("answer", qa.get("adversarial_answer")))))
    assert len(pairs) > 1900
    return pairs


class _AnswerTokens:
    """rouge-score tokenizer interface over analysis.answers' own tokens (normalized, NLTK-stemmed)."""

    def tokenize(self, text: str) -> list[str]:
        return A._tokens(text)


def test_rouge_l_lcs_and_f_equal_rouge_score_on_the_same_tokens(locomo_pairs):
    """Given identical tokens, rouge_l's LCS and F (beta = 1) are rouge-score's, on every real pair."""
    scorer = rouge_scorer.RougeScorer(["rougeL"], tokenizer=_AnswerTokens())
    ours = [rouge_l(p, g) for p, g in locomo_pairs]
    theirs = [scorer.score(g, p)["rougeL"].fmeasure for p, g in locomo_pairs]  # score(target, prediction)
    assert ours == pytest.approx(theirs, abs=1e-12)
    assert sum(x > 0 for x in ours) > 1000  # mostly partial overlaps, not a comparison of zeros


def test_rouge_l_equals_rouge_score_with_its_stemmer_where_the_tokenizations_agree(locomo_pairs):
    """rouge-score's own tokenizer with use_stemmer=True (NLTK's PorterStemmer, default mode, as here) against
    rouge_l. The normalizations differ: rouge-score keeps a/an/the/and, splits at every character outside
    [a-z0-9] (so "don't" -> "don t", "1,000" -> "1 000", accented letters split words) and stems only words of
    more than three letters ("was" stays "was"; here "wa"). Run on LoCoMo's normalize_answer output (articles
    and ASCII punctuation already gone), the two agree token for token on most pairs; on those F must be
    identical. The pairs where they disagree are counted, not compared."""
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    stemmer = PorterStemmer()
    agree = 0
    for p, g in locomo_pairs:
        np_, ng = normalize_answer(p), normalize_answer(g)
        if A._tokens(p) != rouge_tokenize.tokenize(np_, stemmer) or A._tokens(g) != rouge_tokenize.tokenize(
            ng, stemmer
        ):
            continue
        agree += 1
        assert rouge_l(p, g) == pytest.approx(scorer.score(ng, np_)["rougeL"].fmeasure, abs=1e-12), (p, g)
    assert agree > 600, agree  # 725 of 1,977 pairs at the time of writing


def test_embedding_similarity_is_the_cosine_of_each_pair_by_hand():
    from analysis.answers import embedding_similarity

    vectors = {"a": [1.0, 0.0], "b": [0.6, 0.8], "c": [0.0, 1.0], "d": [-1.0, 0.0]}
    encode = lambda texts: np.array([vectors[t] for t in texts])  # noqa: E731 - a fixed, normalized "embedder"
    # cos(a, b) = 0.6, cos(b, c) = 0.8, cos(a, d) = -1, cos(c, c) = 1
    assert embedding_similarity(["a", "b", "a", "c"], ["b", "c", "d", "c"], encode) == pytest.approx(
        [0.6, 0.8, -1.0, 1.0]
    )
    assert embedding_similarity([], [], encode) == []
    with pytest.raises(ValueError, match="gold"):
        embedding_similarity(["a"], [], encode)


def test_embedding_similarity_with_minilm_ranks_a_paraphrase_above_an_unrelated_answer(embedder):
    from analysis.answers import embedding_similarity

    encode = lambda texts: embedder.encode(texts, role="query")  # noqa: E731
    para, unrelated = embedding_similarity(
        ["She moved to Lisbon in May.", "The printer is out of toner."], ["In May she relocated to Lisbon."] * 2, encode
    )
    assert para > 0.7 > unrelated and unrelated < 0.3
