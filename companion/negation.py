"""Negation and exclusion cues: words by which a request says what *not* to do.

A request holding one gives no value as the user's own words (`intent.py` says why). The
cues are matched case-folded (NFC) as whole words, where a word is a run of letters,
marks and digits joined by inner apostrophes or hyphens: English first, with the basic
negation and exclusion words of the languages a phone's owner most often writes in; any
word ending in "n't" ("don't", "won't"), also as typed without its apostrophe ("dont",
"cant", "shouldnt": `UNAPOSTROPHED`) or with another apostrophe-like mark (`APOSTROPHES`);
the phrases in `PHRASES`; "forget" and "disregard" anywhere; "stop", "cancel" and "abort"
where they call off an action rather than name a thing to delete ("Cancel my Team sync"
deletes a meeting and gives its name as the user's words): at the end of a clause
("Actually, cancel."), before a word that points back ("cancel that", "stop it") or
before a sending ("stop texting", "cancel the message"); and, for scripts written
without spaces, the characters in `INFIXES` anywhere in the request. A cue the lists
miss leaves the request's values the user's words, as before this rule.
"""

from __future__ import annotations

import unicodedata

from .words import Word, words

CUES = {  # the words of each language, separated by spaces
    "English": "not no never none nothing nobody nowhere neither nor cannot except excepting "
    "excluding exclude instead avoid ignore without unless skip besides nope forget "
    "forgot forgotten disregard nevermind",
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


def _set(said: str) -> frozenset[str]:
    return frozenset(said.split())


APOSTROPHES = str.maketrans(dict.fromkeys("`\u00b4\u02bc\u2018\u2032", "'"))
UNAPOSTROPHED = _set(  # "n't" typed without its apostrophe
    "dont doesnt didnt cant couldnt wont wouldnt shouldnt isnt arent wasnt werent hasnt "
    "havent hadnt mustnt neednt aint shant mightnt oughtnt darent"
)
CALL_OFF = _set("stop cancel abort")  # cues where they call off an action
BACK = _set("that this it them those these everything all")  # "cancel that"
DETERMINERS = _set("the my that this your any")
LEADS = _set("and then please no oh so just actually wait now ok okay")  # before a command
SENDING = _set(  # what "stop" or "cancel" calls off when it names it
    "text texts texting message messages messaging mail mails mailing email emails emailing "
    "sms send sends sending call calls calling reply replies replying write writing pay "
    "paying payment transfer transferring forward forwarding share sharing post posting "
    "contact contacting"
)


def negates(request: str) -> bool:
    """Whether `request` holds a negation or exclusion cue (see the module)."""
    text = unicodedata.normalize("NFC", request).casefold().translate(APOSTROPHES)
    if any(infix in text for infix in INFIXES):
        return True
    found = words(text)
    said = [w.text for w in found]
    if any(w in WORDS or w in UNAPOSTROPHED or w.endswith(CONTRACTIONS) for w in said):
        return True
    if any(_calls_off(text, found, i) for i, w in enumerate(said) if w in CALL_OFF):
        return True
    joined = " ".join(said)
    return any(f" {phrase} " in f" {joined} " for phrase in PHRASES)


def _calls_off(text: str, found: list[Word], i: int) -> bool:
    """Whether the `CALL_OFF` word `found[i]` calls off an action: said to the phone (it
    opens its clause, maybe after "and", "please"…: not "the bus stop", "to stop"), and
    the last word of its clause, or before a word pointing back or a sending (after a
    determiner or not)."""
    opens = i == 0 or text[found[i - 1].end : found[i].start].strip() != ""
    if not opens and found[i - 1].text not in LEADS:
        return False
    if i + 1 == len(found) or text[found[i].end : found[i + 1].start].strip():
        return True  # the request or its clause ends ("Actually, cancel.")
    after = [w.text for w in found[i + 1 : i + 3]]
    if after[0] in BACK or after[0] in SENDING:
        return True
    return after[0] in DETERMINERS and len(after) > 1 and after[1] in SENDING
