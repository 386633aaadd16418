"""Anserini's ``DefaultEnglishAnalyzer`` in Python: the text analysis behind Pyserini 1.6.0's BM25.

``analyze(text) -> list[str]``: Lucene ``StandardTokenizer`` (UAX#29 word breaks, emoji sequences, max
token length 255), ``EnglishPossessiveFilter`` (drops a trailing ``'s``/``’s``/``＇s``), ``LowerCaseFilter``
(per code point), ``StopFilter`` with Lucene's 33 English stopwords (``STOPWORDS``, the project's one
copy of that list), ``PorterStemFilter`` (Lucene's ``PorterStemmer``, ported below as ``porter_stem``).

The tokenizer is a set of regular expressions over the Unicode properties of the ``regex``
module, corrected where Lucene's grammar (JFlex, Unicode 9.0 and emoji 11.0 data) differs; the
corrections were found by comparing with Anserini's analyzer on every code point up to U+3FFFF in
16 contexts, and the analyzer gives Anserini's terms on every LoCoMo turn and question
(tests/lethe/retrieval/test_bm25.py).
"""

from __future__ import annotations

import functools
import re
from typing import Any

import regex

# ---------------------------------------------------------------------------------------------
# Analysis
# ---------------------------------------------------------------------------------------------

#: Lucene's ``EnglishAnalyzer.ENGLISH_STOP_WORDS_SET`` (Anserini's default stopwords).
STOPWORDS: frozenset[str] = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then "
    "there these they this to was will with".split()
)

#: ``StandardAnalyzer.DEFAULT_MAX_TOKEN_LENGTH``: longer words are cut into pieces (UTF-16 units).
MAX_TOKEN_LENGTH = 255

# Corrections to the regex module's (newer) Unicode data, found by running Anserini's analyzer on
# every code point U+0000-U+3FFFF and U+E0000-U+E01EF in several contexts:
# - code points Lucene's grammar (JFlex, Unicode 9) treats as "other" (never part of a token):
#   mostly characters assigned after Unicode 9, plus a few whose word-break class changed since;
_UNICODE9_OTHER = (
    "B8 2E5-2EB 558 55A 55F 58A-58C 5C8-5C9 870-887 889-891 897-89F 8B5 8BE-8D2 B53-B55 C3C "
    "C5C-C5D CDC-CDD CF3 D04 D81 ECE 170D 1715 171F 180F 1ABF-1AF0 1B4C 1C89-1C8A 1DFA 208F "
    "209D-209F 2C2F 2C5F 31BB-31BF 4DB6-4DBF 9FF0-9FFF A708-A716 A7C0-A7C1 A7C7-A7DD A7E2 "
    "A7F1-A7F6 A82C AB68-AB69 AB6C-AB6D 10570-1057A 1057C-1058A 1058C-10592 10594-10595 "
    "10597-105A1 105A3-105B1 105B3-105B9 105BB-105BC 105C0-105F3 10780-10785 10787-107B0 "
    "107B2-107BF 10940-10959 10D40-10D65 10D69-10D6D 10D6F-10D85 10E80-10EA9 10EAB-10EAC "
    "10EB0-10EB1 10EC2-10EC7 10ECB-10ECF 10ED9-10EEE 10EF0-10EFF 10F70-10F85 10FB0-10FC4 "
    "11070-11075 110C2 11147 111CE-111CF 1123F-11241 11380-11389 1138B 1138E 11390-113B5 "
    "113B7-113C0 113C2 113C5 113C7-113CA 113CC-113D3 113E1-113E2 11460-11461 116D0-116E3 "
    "11740-11746 11900-11906 11909 1190C-11913 11915-11916 11918-11935 11937-11938 1193B-11943 "
    "11950-11959 11AB0-11ABF 11B0A 11B60-11B67 11BC0-11BE0 11BF0-11BF9 11DB0-11DDB 11DE0-11DE9 "
    "11DF0-11DF1 11F00-11F10 11F12-11F3A 11F3E-11F42 11F50-11F5A 11FB0 1246F 12475-1247F "
    "12550-12686 12F90-12FF0 1342F 13439-13455 13460-143FA 16100-16139 16A70-16ABE 16AC0-16AC9 "
    "16D40-16D6C 16D70-16D79 16EA0-16EB8 16EBB-16ED3 16FE2 16FE4 16FF0-16FF6 1AFF0-1AFF3 "
    "1AFF5-1AFFB 1AFFD-1AFFE 1B11F-1B128 1B132 1B155 1B168 1CCF0-1CCF9 1CF00-1CF2D 1CF30-1CF46 "
    "1D127-1D128 1D250-1D252 1D25B-1D25C 1D25F 1D280-1D281 1D6A6 1DF00-1DF81 1DF90-1DF96 "
    "1DFCD-1DFFF 1E030-1E06D 1E08F 1E290-1E2AE 1E4D0-1E4F9 1E5D0-1E5FA 1E6C0-1E6DE 1E6E0-1E6F5 "
    "1E6FE-1E6FF 1E7E0-1E7E6 1E7E8-1E7EB 1E7ED-1E7EE 1E7F0-1E7FE 2A6D7-2A6DF 2B735-2B73F 2B81E "
    "2CEA2-2CEAD 2EBF0-2EE5D 30000-3134A 31350-33479 "
)
# - pictographs that are Extended_Pictographic in the emoji 11.0 data Lucene embeds, but not in
#   the regex module's data (e.g. U+2605 BLACK STAR, U+266A EIGHTH NOTE, the U+1F0xx game symbols);
_EMOJI11_EXTRA = (
    "2388 2605 2607-260D 260F-2610 2612 2616-2617 2619-261C 261E-261F 2621 2624-2625 "
    "2627-2629 262B-262D 2630-2637 263B-263F 2641 2643-2647 2654-265E 2661-2662 2664 2667 "
    "2669-267A 267C-267D 2680-2685 2690-2691 2698 269A 269D-269F 26A2-26A6 26A8-26A9 26AC-26AF "
    "26B2-26BC 26BF-26C3 26C6-26C7 26C9-26CD 26D0 26D2 26D5-26E8 26EB-26EF 26F6 26FB-26FC "
    "26FE-2701 2703-2704 270E 2710-2711 2765-2767 1F000-1F003 1F005-1F02B 1F030-1F093 1F0A0-1F0AE "
    "1F0B1-1F0BF 1F0C1-1F0CE 1F0D1-1F0F5 1F10D-1F10F 1F12F 1F16C-1F16F 1F1AD-1F1AE 1F260-1F265 "
    "1F322-1F323 1F394-1F395 1F398 1F39C-1F39D 1F3F1-1F3F2 1F3F6 1F4FE 1F546-1F548 1F54F "
    "1F568-1F56E 1F571-1F572 1F57B-1F586 1F588-1F589 1F58E-1F58F 1F591-1F594 1F597-1F5A3 "
    "1F5A6-1F5A7 1F5A9-1F5B0 1F5B3-1F5BB 1F5BD-1F5C1 1F5C5-1F5D0 1F5D4-1F5DB 1F5DF-1F5E0 1F5E2 "
    "1F5E4-1F5E7 1F5E9-1F5EE 1F5F0-1F5F2 1F5F4-1F5F9 1F6C6-1F6CA 1F6D3-1F6D4 1F6E6-1F6E8 1F6EA "
    "1F6F1-1F6F2 1F774-1F77F 1F7D5-1F7DB 1F7F1-1F7FF 1F8B0-1F8BB 1F8C0-1F8C1 1F8D0-1F8D8 "
    "1FA00-1FA57 1FA60-1FA6D 1FB00-1FBFF "
)
# - prepended concatenation marks, Format in Unicode 9 (they attach to the preceding character);
_PREPEND_FORMAT = "600-605 6DD 70F 8E2 110BD 110CD"
# - two presentation forms that were MidNum in Unicode 9; U+19DA (Complex_Context in Unicode 9).
_MIDNUM9 = "FE10 FE14"
_SEA9 = "19DA"


def _ranges(spec: str) -> str:
    """'41-5A 5F' -> a regex class body of those code point ranges."""
    out = []
    for item in spec.split():
        a, _, b = item.partition("-")
        out.append(f"\\U{int(a, 16):08X}" + (f"-\\U{int(b, 16):08X}" if b else ""))
    return "".join(out)


_NOT9 = "[" + _ranges(" ".join((_UNICODE9_OTHER, _PREPEND_FORMAT, _MIDNUM9, _SEA9, _EMOJI11_EXTRA))) + "]"


def _cls(body: str, exclude: str = _NOT9) -> str:
    """A character class of ``body`` minus the code points Lucene's grammar classifies otherwise."""
    return f"[[{body}]--{exclude}]"


# UAX#29 WB4: Extend, Format and ZWJ attach to the preceding character.
_XC = "[" + _cls(r"\p{WB=Extend}\p{WB=Format}\p{WB=ZWJ}") + _ranges(_PREPEND_FORMAT) + "]"
_X = _XC + "*"
_XSC = "[" + _XC + r"--[\uFE0E\uFE0F]]"  # without the presentation selectors
_XS = _XSC + "*"
_AH = _cls(r"\p{WB=ALetter}\p{WB=Hebrew_Letter}") + _X
_HL = _cls(r"\p{WB=Hebrew_Letter}") + _X
_NUM = _cls(r"\p{WB=Numeric}\uFF10-\uFF19") + _X
_KAT = _cls(r"\p{WB=Katakana}") + _X
_ENL = _cls(r"\p{WB=ExtendNumLet}") + _X
_MIDL = _cls(r"\p{WB=MidLetter}\p{WB=MidNumLet}\p{WB=Single_Quote}") + _X
_MIDN = "[" + _cls(r"\p{WB=MidNum}\p{WB=MidNumLet}\p{WB=Single_Quote}") + _ranges(_MIDNUM9) + "]" + _X
_SQ = r"\p{WB=Single_Quote}" + _X
_DQ = r"\p{WB=Double_Quote}" + _X
# A Hebrew letter that starts WB7a/b/c's "Hebrew_Letter (Single_Quote | Double_Quote Hebrew_Letter)":
# a letter run does not take it directly (or after '_'), so that the quote rule can (longest match).
_HLQ = f"{_HL}(?:{_SQ}|{_DQ}{_HL})"
_INNER = (
    f"(?:{_KAT}(?:(?:{_ENL})*{_KAT})*"
    f"|(?:{_HLQ}"
    f"|{_NUM}(?:(?:(?:{_ENL})*|{_MIDN}){_NUM})*"
    f"|{_AH}(?:(?:(?:{_ENL})*(?!{_HLQ})|{_MIDL}){_AH})*)+)"
)
# Lucene's ALPHANUM/NUM/HANGUL/KATAKANA rules (NUM and the others are subsets of this one).
_WORD = f"(?:{_ENL})*{_INNER}(?:(?:{_ENL})+{_INNER})*(?:{_ENL})*"
# Emoji sequences (UTS#51 emoji_sequence, as in Lucene's grammar).
_ZWJ = r"\p{WB=ZWJ}"
_EMOJI_CHAR = (
    "["
    + _cls(
        r"\p{Extended_Pictographic}"
        r"[\p{Emoji}--[\p{WB=Regional_Indicator}0-9#*\u00A9\u00AE\u2122\u3030\u303D\p{Emoji_Modifier}]]",
        "[" + _ranges(_UNICODE9_OTHER) + "]",
    )
    + _ranges(_EMOJI11_EXTRA)
    + "]"
)
_EMOJI_START = f"{_ZWJ}*(?:{_EMOJI_CHAR}" + r"|\p{Emoji_Modifier_Base}|\p{Emoji_Modifier})"
# extenders of an emoji, except a ZWJ that joins the next emoji of the sequence (longest match)
_XE = f"(?:(?!{_ZWJ}{_EMOJI_START}){_XSC})*"
_EMOJI_ELEM = (
    f"(?:{_ZWJ}*{_EMOJI_CHAR}{_XE}"
    + r"\uFE0F?"
    + f"|(?:{_ZWJ}*"
    + r"\p{Emoji_Modifier_Base}"
    + f"{_XE})?"
    + r"\p{Emoji_Modifier}"
    + f"{_XE})"
)
_EMOJI = (
    f"(?:{_EMOJI_ELEM}(?:(?:{_ZWJ}{_EMOJI_ELEM})*"
    + r"|[\U000E0020-\U000E007E]+\U000E007F)"
    + r"|[0-9#*]"
    + _XS
    + r"\uFE0F?\u20E3"
    + _XS
    + r"|(?:\p{WB=Regional_Indicator}"
    + _X
    + "){2})"
)
_SEA = "(?:[" + _cls(r"\p{LB=Complex_Context}") + _ranges(_SEA9) + "]" + _X + ")+"
_HAN = _cls(r"\p{Script=Han}") + _X
_HIRA = _cls(r"\p{Script=Hiragana}") + _X

_FLAGS = regex.V1
# JFlex takes the longest match over all rules. The patterns above are written so that greedy
# matching gives each rule's longest match; a first-match alternation of the rules then gives the
# longest token except where a word rule and an emoji sequence compete across a ZWJ (e.g. U+2139
# INFORMATION SOURCE is a letter and an emoji): for tokens with a ZWJ every rule is tried.


@functools.cache
def _grammar() -> tuple[Any, Any, Any]:
    """(token start characters, first-match pattern of all rules, run of ExtendNumLet), compiled
    on first use with non-ASCII text."""
    starts = (
        _cls(r"\p{WB=ALetter}\p{WB=Hebrew_Letter}\p{WB=Numeric}\uFF10-\uFF19\p{WB=Katakana}\p{WB=ExtendNumLet}")
        + _EMOJI_CHAR
        + r"\p{Emoji_Modifier_Base}\p{Emoji_Modifier}"
        + _ZWJ
        + r"0-9#*\p{WB=Regional_Indicator}"
        + _cls(r"\p{LB=Complex_Context}")
        + _ranges(_SEA9)
        + _cls(r"\p{Script=Han}")
        + _cls(r"\p{Script=Hiragana}")
    )
    return (
        regex.compile(f"[{starts}]", _FLAGS),
        regex.compile(f"{_WORD}|{_EMOJI}|{_SEA}|{_HAN}|{_HIRA}", _FLAGS),
        regex.compile(f"(?:{_ENL})+", _FLAGS),
    )


@functools.cache
def _rules() -> list[Any]:
    """One pattern per rule of Lucene's grammar, for the rare tokens needing the longest match."""
    return [regex.compile(p, _FLAGS) for p in (_EMOJI, _WORD, _SEA, _HAN, _HIRA)]


# The same word rule restricted to ASCII text: letters, digits and '_' join; ':' '.' "'" join two
# letters, ',' ';' '.' "'" join two digits; a token holds at least one letter or digit.
_ASCII_WORD = re.compile(r"_*[A-Za-z0-9](?:[A-Za-z0-9_]+|(?<=[A-Za-z])[:.'](?=[A-Za-z])|(?<=[0-9])[,;.'](?=[0-9]))*")
# A whitespace-delimited run holding a non-ASCII character (anchored at the run start: linear time).
_NON_ASCII_RUN = re.compile(r"(?<![^ \t\n\r\f\v])[\x00-\x08\x0e-\x1f\x21-\x7f]*+[^\x00-\x7f][^ \t\n\r\f\v]*+")
_NEEDS_LONGEST = re.compile("\u200d")
_POSSESSIVE_APOSTROPHES = "'\u2019\uff07"


def _utf16_len(s: str) -> int:
    return len(s) + sum(1 for c in s if ord(c) > 0xFFFF)


def _longest(text: str, pos: int, endpos: int) -> int:
    """End of the longest rule match at ``pos`` within ``text[:endpos]`` (``pos`` if none)."""
    end = pos
    for rule in _rules():
        m = rule.match(text, pos, endpos)
        if m is not None and m.end() > end:
            end = m.end()
    return end


def _window_end(text: str, s: int, n: int) -> int:
    """End of the first MAX_TOKEN_LENGTH UTF-16 units of ``text[s:n]``."""
    lim, units = s, 0
    while lim < n:
        units += 2 if ord(text[lim]) > 0xFFFF else 1
        if units > MAX_TOKEN_LENGTH:
            break
        lim += 1
    return lim


_BOUND = 2 * MAX_TOKEN_LENGTH + 2  # code points past a token start that decide its (capped) end
_ASCII_START = re.compile(r"[A-Za-z0-9_]")
_ASCII_ENL_RUN = re.compile(r"_+")


def _scan(text: str, pos: int, n: int, out: list[str], start: Any, first: Any, enl_run: Any, full: bool) -> None:
    """Append the tokens of ``text[pos:n]`` to ``out``.

    ``start`` finds characters that may begin a token, ``first`` matches the token there,
    ``enl_run`` matches a run of connector punctuation ('_'); ``full`` is False for ASCII-only
    text (``first`` is then ``_ASCII_WORD``).
    """
    while pos < n:
        m = start.search(text, pos, n)
        if m is None:
            return
        s = m.start()
        bound = min(n, s + _BOUND)
        m = first.match(text, s, bound)
        e = m.end() if m is not None else s
        if full and _NEEDS_LONGEST.search(text, s, e) is not None:
            e = _longest(text, s, bound)
        if e - s > MAX_TOKEN_LENGTH // 2 and _utf16_len(text[s:e]) > MAX_TOKEN_LENGTH:
            # JFlex's buffer holds 255 UTF-16 units: the longest match inside that window wins
            w = _window_end(text, s, n)
            if full:
                e = _longest(text, s, w)
            else:
                m = first.match(text, s, w)
                e = m.end() if m is not None else s
        if e == s:  # no token starts here: JFlex skips one character
            pos = s + 1
            r = enl_run.match(text, s, n)
            if r is not None and r.end() - s > MAX_TOKEN_LENGTH:
                # nor at any '_' farther than 255 characters from the run's end
                pos = max(pos, r.end() - MAX_TOKEN_LENGTH)
            continue
        out.append(text[s:e])
        pos = e


def _ascii_tokens(text: str, out: list[str]) -> None:
    toks = _ASCII_WORD.findall(text)
    if toks and max(map(len, toks)) > MAX_TOKEN_LENGTH:
        _scan(text, 0, len(text), out, _ASCII_START, _ASCII_WORD, _ASCII_ENL_RUN, False)
    else:
        out.extend(toks)


def tokenize(text: str) -> list[str]:
    """Lucene ``StandardTokenizer`` tokens of ``text`` (original case, max 255 UTF-16 units)."""
    out: list[str] = []
    if text.isascii():
        _ascii_tokens(text, out)
        return out
    # ASCII whitespace always separates tokens: runs without non-ASCII characters take the fast
    # ASCII rule, the runs around non-ASCII characters the full grammar.
    pos = 0
    start, first, enl_run = _grammar()
    for m in _NON_ASCII_RUN.finditer(text):
        s, e = m.span()
        if s > pos:
            _ascii_tokens(text[pos:s], out)
        _scan(text, s, e, out, start, first, enl_run, True)
        pos = e
    if pos < len(text):
        _ascii_tokens(text[pos:], out)
    return out


# ---- Lucene's PorterStemmer (org.apache.lucene.analysis.en.PorterStemmer), operating on UTF-16
# code units like the Java original. Words of 1-2 units are left unchanged.


class _Porter:
    __slots__ = ("b", "j", "k")

    def __init__(self, word: str):
        self.b = list(word)
        self.k = len(word) - 1
        self.j = 0

    def cons(self, i: int) -> bool:
        c = self.b[i]
        if c in "aeiou":
            return False
        if c == "y":
            return True if i == 0 else not self.cons(i - 1)
        return True

    def m(self) -> int:
        n, i, j = 0, 0, self.j
        while True:
            if i > j:
                return n
            if not self.cons(i):
                break
            i += 1
        i += 1
        while True:
            while True:
                if i > j:
                    return n
                if self.cons(i):
                    break
                i += 1
            i += 1
            n += 1
            while True:
                if i > j:
                    return n
                if not self.cons(i):
                    break
                i += 1
            i += 1

    def vowelinstem(self) -> bool:
        return any(not self.cons(i) for i in range(self.j + 1))

    def doublec(self, j: int) -> bool:
        return j >= 1 and self.b[j] == self.b[j - 1] and self.cons(j)

    def cvc(self, i: int) -> bool:
        if i < 2 or not self.cons(i) or self.cons(i - 1) or not self.cons(i - 2):
            return False
        return self.b[i] not in "wxy"

    def ends(self, s: str) -> bool:
        ln = len(s)
        o = self.k - ln + 1
        if o < 0:
            return False
        if "".join(self.b[o : self.k + 1]) != s:
            return False
        self.j = self.k - ln
        return True

    def setto(self, s: str) -> None:
        o = self.j + 1
        del self.b[o:]
        self.b.extend(s)
        self.k = self.j + len(s)

    def r(self, s: str) -> None:
        if self.m() > 0:
            self.setto(s)

    def step1(self) -> None:
        b = self.b
        if b[self.k] == "s":
            if self.ends("sses"):
                self.k -= 2
            elif self.ends("ies"):
                self.setto("i")
            elif b[self.k - 1] != "s":
                self.k -= 1
        if self.ends("eed"):
            if self.m() > 0:
                self.k -= 1
        elif (self.ends("ed") or self.ends("ing")) and self.vowelinstem():
            self.k = self.j
            if self.ends("at"):
                self.setto("ate")
            elif self.ends("bl"):
                self.setto("ble")
            elif self.ends("iz"):
                self.setto("ize")
            elif self.doublec(self.k):
                ch = self.b[self.k]
                self.k -= 1
                if ch in "lsz":
                    self.k += 1
            elif self.m() == 1 and self.cvc(self.k):
                self.setto("e")

    def step2(self) -> None:
        if self.ends("y") and self.vowelinstem():
            self.b[self.k] = "i"

    _STEP3 = {
        "a": (("ational", "ate"), ("tional", "tion")),
        "c": (("enci", "ence"), ("anci", "ance")),
        "e": (("izer", "ize"),),
        "l": (("bli", "ble"), ("alli", "al"), ("entli", "ent"), ("eli", "e"), ("ousli", "ous")),
        "o": (("ization", "ize"), ("ation", "ate"), ("ator", "ate")),
        "s": (("alism", "al"), ("iveness", "ive"), ("fulness", "ful"), ("ousness", "ous")),
        "t": (("aliti", "al"), ("iviti", "ive"), ("biliti", "ble")),
        "g": (("logi", "log"),),
    }
    _STEP4 = {
        "e": (("icate", "ic"), ("ative", ""), ("alize", "al")),
        "i": (("iciti", "ic"),),
        "l": (("ical", "ic"), ("ful", "")),
        "s": (("ness", ""),),
    }
    _STEP5 = {
        "a": ("al",),
        "c": ("ance", "ence"),
        "e": ("er",),
        "i": ("ic",),
        "l": ("able", "ible"),
        "n": ("ant", "ement", "ment", "ent"),
        "s": ("ism",),
        "t": ("ate", "iti"),
        "u": ("ous",),
        "v": ("ive",),
        "z": ("ize",),
    }

    def step3(self) -> None:
        if self.k == 0:
            return
        for suffix, repl in self._STEP3.get(self.b[self.k - 1], ()):
            if self.ends(suffix):
                self.r(repl)
                return

    def step4(self) -> None:
        for suffix, repl in self._STEP4.get(self.b[self.k], ()):
            if self.ends(suffix):
                self.r(repl)
                return

    def step5(self) -> None:
        if self.k == 0:
            return
        c = self.b[self.k - 1]
        if c == "o":
            if not ((self.ends("ion") and self.j >= 0 and self.b[self.j] in "st") or self.ends("ou")):
                return
        elif not any(self.ends(s) for s in self._STEP5.get(c, ())):
            return
        if self.m() > 1:
            self.k = self.j

    def step6(self) -> None:
        self.j = self.k
        if self.b[self.k] == "e":
            a = self.m()
            if a > 1 or (a == 1 and not self.cvc(self.k - 1)):
                self.k -= 1
        if self.b[self.k] == "l" and self.doublec(self.k) and self.m() > 1:
            self.k -= 1

    def stem(self) -> str:
        if self.k > 1:
            self.step1()
            self.step2()
            self.step3()
            self.step4()
            self.step5()
            self.step6()
        return "".join(self.b[: self.k + 1])


def porter_stem(word: str) -> str:
    """Lucene's Porter stem of a lowercased word (UTF-16 semantics; 1-2 unit words unchanged)."""
    if word.isascii():
        return _Porter(word).stem()
    units = word.encode("utf-16-le", "surrogatepass")
    if len(units) == 2 * len(word):
        return _Porter(word).stem()
    as_units = "".join(chr(int.from_bytes(units[i : i + 2], "little")) for i in range(0, len(units), 2))
    return _Porter(as_units).stem().encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _lower(tok: str) -> str:
    """Java ``Character.toLowerCase`` per code point (no final sigma, U+0130 -> 'i')."""
    if tok.isascii():
        return tok.lower()
    return "".join("i" if c == "\u0130" else c.lower() for c in tok)


_TERM_CACHE: dict[str, str | None] = {}  # token -> term (None: a stopword), shared by all analyses
_TERM_CACHE_MAX = 1_000_000
_MISSING = object()


def _term(tok: str) -> str | None:
    """Possessive, lowercase, stopword and Porter filters on one token; None if it is dropped."""
    t = _TERM_CACHE.get(tok, _MISSING)
    if t is not _MISSING:
        return t  # type: ignore[return-value]
    w = tok
    if len(w) >= 2 and w[-1] in "sS" and w[-2] in _POSSESSIVE_APOSTROPHES:
        w = w[:-2]
    w = _lower(w)
    out = None if w in STOPWORDS else porter_stem(w)
    if len(_TERM_CACHE) >= _TERM_CACHE_MAX:
        _TERM_CACHE.clear()
    _TERM_CACHE[tok] = out
    return out


def analyze(text: str) -> list[str]:
    """Anserini's default English analysis of ``text``: the indexed terms, in order."""
    toks = tokenize(text)
    try:
        terms = list(map(_TERM_CACHE.__getitem__, toks))  # every token seen before
    except KeyError:
        terms = [_term(t) for t in toks]
    return [t for t in terms if t is not None]


# ---------------------------------------------------------------------------------------------
# Variants of the analysis (seed 004's tokenization advice), for the in-memory BM25 only
# ---------------------------------------------------------------------------------------------


def _unpossessive_lower(tok: str) -> str:
    if len(tok) >= 2 and tok[-1] in "sS" and tok[-2] in _POSSESSIVE_APOSTROPHES:
        tok = tok[:-2]
    return _lower(tok)


@functools.lru_cache(maxsize=200_000)
def _term_no_stem(tok: str) -> str | None:
    w = _unpossessive_lower(tok)
    return None if w in STOPWORDS else w


@functools.lru_cache(maxsize=200_000)
def _term_no_stop(tok: str) -> str:
    return porter_stem(_unpossessive_lower(tok))


def analyze_no_stem(text: str) -> list[str]:
    """``analyze`` without the Porter stemmer (tokenizer, possessive, lowercase, stopwords)."""
    return [t for t in map(_term_no_stem, tokenize(text)) if t is not None]


def analyze_no_stopwords(text: str) -> list[str]:
    """``analyze`` without the stopword filter (tokenizer, possessive, lowercase, Porter)."""
    return [_term_no_stop(t) for t in tokenize(text)]


_SIMPLE = regex.compile(r"[\p{L}\p{N}]+")


def analyze_simple(text: str) -> list[str]:
    """Lowercased runs of letters and digits (every other character splits): no stopwords, no stemming."""
    return [m.lower() for m in _SIMPLE.findall(text)]


def analyze_whitespace(text: str) -> list[str]:
    """``text.lower().split()``: the whitespace tokenization seed 004 starts from (punctuation stays on words)."""
    return text.lower().split()


#: name -> analysis; ``english`` is Anserini's (Pyserini's BM25), the others drop one step or use a plain tokenizer.
ANALYZERS = {
    "english": analyze,
    "no_stem": analyze_no_stem,
    "no_stopwords": analyze_no_stopwords,
    "simple": analyze_simple,
    "whitespace": analyze_whitespace,
}


def get_analyzer(name: str):
    """The analysis named ``name`` (:data:`ANALYZERS`); an unknown name raises ValueError listing the known ones."""
    try:
        return ANALYZERS[name]
    except KeyError:
        raise ValueError(f"unknown analyzer {name!r}; known: {sorted(ANALYZERS)}") from None
