"""Negation and exclusion cues: words by which a request says what *not* to do.

A request holding one gives no value as the user's own words (`intent.py` says why). The
cues are matched case-folded (NFC) as whole words, where a word is a run of letters,
marks and digits joined by inner apostrophes or hyphens: English first, with the basic
negation and exclusion words of the languages a phone's owner most often writes in; any
word ending in "n't" ("don't", "won't"); the phrases in `PHRASES`; and, for scripts
written without spaces, the characters in `INFIXES` anywhere in the request. A cue the
lists miss leaves the request's values the user's words, as before this rule.
"""

from __future__ import annotations

import unicodedata

from .words import words

CUES = {  # the words of each language, separated by spaces
    "English": "not no never none nothing nobody nowhere neither nor cannot except excepting "
    "excluding exclude instead avoid ignore without unless skip besides nope",
    "German, Dutch": "nicht nie niemals kein keine keinen keinem keiner keines außer ohne "
    "statt anstatt niet nooit geen behalve zonder",
    "French, Spanish, Portuguese, Italian": "ne pas jamais aucun aucune sauf sans non nunca "
    "jamás ningún ninguno ninguna excepto salvo sin ni não nem exceto sem nenhum nenhuma mai "
    "nessuno nessuna tranne senza né",
    "Polish, Czech, Russian, Ukrainian": "nigdy żaden żadna oprócz bez nikdy žádný kromě не "
    "нет ни никогда никто ничего кроме без ні ніколи крім",
    "Turkish, Greek, Arabic, Hebrew, Hindi, Korean": "değil asla hiç hariç olmadan δεν μην "
    "όχι ποτέ εκτός χωρίς لا لم لن ليس أبدا إلا بدون غير לא אל אף בלי חוץ מלבד नहीं न मत "
    "कभी बिना सिवा 안 말고 제외",
}
WORDS = frozenset(
    unicodedata.normalize("NFC", w).casefold() for said in CUES.values() for w in said.split()
)
PHRASES = ("other than", "rather than", "apart from", "but for")
INFIX_CUES = "不 没 沒 别 別 勿 莫 無 无 非 除 以外 ない ません 않 못 없"  # CJK: inside words
INFIXES = tuple(INFIX_CUES.split())
CONTRACTIONS = ("n't", "n\u2019t")


def negates(request: str) -> bool:
    """Whether `request` holds a negation or exclusion cue (see the module)."""
    text = unicodedata.normalize("NFC", request).casefold()
    if any(infix in text for infix in INFIXES):
        return True
    said = [w.text for w in words(text)]
    if any(w in WORDS or w.endswith(CONTRACTIONS) for w in said):
        return True
    joined = " ".join(said)
    return any(f" {phrase} " in f" {joined} " for phrase in PHRASES)
