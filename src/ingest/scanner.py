"""Heuristic prompt-injection scanner for chunks at ingestion time.

Retrieved chunks end up in another model's context, so a chunk that talks *to* that model is marked
``injection_suspect`` together with the rule that matched. The rules are deliberately conservative:
compliance text is full of "ignore", "override", "system prompt", "agent" and "token", so every rule
needs an attack-shaped construction (an imperative addressed to an AI, an override verb aimed at the
model's instructions, a fake chat-template marker, ...), never a single alarming word. Gaps between
the parts of a construction are bounded and never cross a sentence, a clause (;), a line or a table cell.

Standard library only; compiling the patterns at import is the only work done then.
"""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata
from dataclasses import dataclass
from typing import NamedTuple

from ingest.hidden import hidden_inline_html, reveal_invisible_characters

__all__ = ["RULES", "SCANNER_VERSION", "InjectionFinding", "Rule", "normalise", "rule_findings", "scan_for_injection"]

EXCERPT_LIMIT = 120
# Stored with every chunk. Raise it whenever a rule, feature or threshold changes what is flagged:
# `kb rescan` re-scans the chunks of older versions and `kb db status` counts them.
# 2: hidden text; 3: classifier; 4: TF-IDF; 5: corpus chunks; 6: more dev data; 7: chat-markup, decode-and-follow,
# model-hailed; 8: header fields (title, owner, regulatory refs), inline HTML hidden by any style the HTML parser
# marks
SCANNER_VERSION = 8
HIDDEN_RULE = "hidden-text"


@dataclass(frozen=True)
class InjectionFinding:
    rule: str  # stable rule id, see RULES
    excerpt: str  # the matched (normalised) text, at most EXCERPT_LIMIT characters


class Rule(NamedTuple):
    id: str
    why: str
    pattern: re.Pattern[str]


def _gap(n: int, also: str = "") -> str:
    """Up to n characters that stay within one sentence, clause, line and table cell."""
    return rf"[^.!?;\n|{also}]{{0,{n}}}?"


# Cyrillic and Greek letters that look like Latin ones ("Nоte tо АI" with Cyrillic о and А).
_LOOKALIKES = ("аеорсухіјѕАВЕКМНОРСТХІЈЅαοκνρτυχΑΒΕΗΙΚΜΝΟΡΤΥΧειη", "aeopcyxijsABEKMHOPCTXIJSaoknptuxABEHIKMNOPTYXein")
_CONFUSABLES = str.maketrans(*_LOOKALIKES)


def _as_normalised(c: str) -> str:
    """A pattern's letter as it may appear in normalised text, in either case ("Модель" reads "Moдeль", "МОДЕЛЬ"
    "MOДEЛЬ", while "у" becomes Latin "y" and "У" stays): a class of every form when there are several."""
    if c.isascii():
        return c
    forms = dict.fromkeys(f.translate(_CONFUSABLES) for f in (c, c.lower(), c.upper()) if len(f) == 1)
    distinct = {f.lower(): f for f in forms}
    return c.translate(_CONFUSABLES) if len(distinct) == 1 else f"[{''.join(distinct.values())}]"


# --- building blocks -------------------------------------------------------------------------------
_NOT = r"(?<!not\s)(?<!n't\s)(?<!never\s)"  # "do not ignore your training" is advice, not an attack
_LEAD = r"(?:^|(?<=[\n|>\[(\"'`:#_-]))[ \t]*"  # start of text, line, table cell, comment, quote


def _ai(*kinds: str) -> str:
    one = (
        rf"(?:(?:{'|'.join(kinds)})[\s-]+(?:assistant|agent|model|system|bot|reader|crawler|summari[sz]er)s?"
        r"|(?:large\s+)?language\s+models?|LLMs?|chat\s?bots?|claude|chatgpt|gpt-?\d\w*|AI)"
    )
    return rf"\b{one}(?:\s+(?:and|or|&)\s+(?:other\s+)?{one})?(?![\w-])"


_AI_WORDS = ("AI", r"A\.I\.", "LLM", "GPT", "gen-?AI")
_AI = _ai(*_AI_WORDS, "automated", "autonomous")  # "automated agents" only count when addressed
_AI_STRICT = _ai(*_AI_WORDS)
_PREFIX = (
    r"(?:(?:note|message|memo|instructions?|notice|reminder|important|urgent)\b(?:\s+\w+){0,2}?\s+(?:to|for)\s+"
    r"|(?:dear|hey|hi|hello|attention|attn)\s+|to\s+(?=any|all|every))(?:(?:any|all|every|the)\s+)?"
)
_READING = r"(?:reading|processing|parsing|summari[sz]ing|analy[sz]ing|ingesting|indexing|reviewing|handling)"
_PARTICIPLE = rf"(?:,?\s+(?:{_READING}|that\s+reads?|who\s+reads?)\b{_gap(50, ':,')})"
_QUALIFIER = r"(?:\s+(?:instructions?|note|notice|only))"
_SEP = r"[ \t]*(?:[:,!—–-]|\n)\s*"
_CLAUSE = rf"(?:(?:if|when|while|before|after)\s+{_gap(60, ',')},\s*)?"
_POLITE = (
    r"(?:(?:please|kindly|now|immediately|first|also|then|just|simply|you\s+must|you\s+should|you\s+need\s+to"
    r"|you\s+are\s+(?:required|instructed)\s+to|make\s+sure\s+(?:to|you))\s+)*"
)
_OBJ = r"(?:the|all|any|every|your|this|these|that|previous|prior|it|them|everything|anything|a\s+copy)\b"
_TOOL = (
    r"\b(?:call|invoke|run|execute|trigger|use)\s+(?:the\s+|your\s+|a\s+)?[`'\"]?[\w.-]+[`'\"]?\s+"
    r"(?:tool|function|plugin|action)\b"
)
_IMP = (  # what an attacker tells the model to do, right after addressing it
    rf"(?:(?:ignore|disregard|forget|override|bypass|skip|omit|hide|conceal|suppress)\s+{_OBJ}"
    r"|(?:tell|inform|assure|advise|convince|reply\s+to|respond\s+to|answer)\s+(?:the\s+|any\s+|all\s+)?"
    r"(?:users?|customers?|readers?|humans?|requesters?|operators?|auditors?|reviewers?)\b"
    r"|(?:say|state|claim|report|confirm|conclude|answer|respond|reply|output|print)\s+(?:only\s+)?"
    r"(?:that\b|with\b|[\"']|the\s+\w+\s+(?:is|are|was|has)\b)"
    rf"|(?:send|forward|post|upload|transmit|e-?mail|share|reveal|disclose|export|repeat|leak|exfiltrate)\s+{_OBJ}"
    rf"|{_TOOL}|you\s+are\s+now\b|your\s+new\s+(?:instructions|task|role|objective)\s+(?:is|are)\b"
    r"|(?:do\s+not|don't|never)\s+(?:mention|reveal|disclose|tell|flag|report|warn|escalate|question)\b"
    rf"|(?:include|insert|append|add)\b{_gap(40)}\b(?:in|to|into)\s+your\s+(?:response|answer|summary|reply|output)"
    r"|(?:approve|authori[sz]e|accept|clear)\s+(?:all|every|any|this|these)\b"
    rf"|(?:summari[sz]e|describe|present|rate|rank|classify|mark|treat|recommend)\s+{_gap(40)}\bas\b"
    r"|(?:pretend|act\s+as|role-?play)\b|(?:follow|obey)\s+(?:these|the\s+following|my|only)\b)"
)
_ENDS_HERE = (  # "ignore previous instructions." yes, "ignore previous instructions for Form 8300" no
    r"(?=\s*(?:$|[.,;:!?)\"'\n|—–-]|(?:and|or|but|then|instead|now|you|given|so\s+far|completely|entirely)\b))"
)
_OVERRIDE = (
    rf"{_NOT}\b(?:ignore|disregard|forget|override|bypass|set\s+aside|discard|abandon|stop\s+following)\b{_gap(40)}"
    r"(?:your\s+(?:(?:previous|prior|original|initial|current|existing|safety|system|built-in|core|content"
    r"|compliance|ethical|moderation)\s+){0,2}(?:instructions|guidelines|rules|system\s+prompt|prompt"
    r"|programming|training|guardrails|directives|constraints|restrictions|policies|filters|safeguards|principles)"
    r"|(?:all\s+(?:of\s+)?(?:the\s+|your\s+)?|any\s+|the\s+)?(?:previous|prior|above|preceding|earlier|original"
    rf"|initial|foregoing)\s+(?:\w+\s+)?(?:instructions|prompts?|directives|guidelines|rules|context){_ENDS_HERE}"
    rf"|the\s+system\s+prompt{_ENDS_HERE}|(?:everything|all)\s+(?:above|before\s+this)\b"
    r"|(?:everything|anything)\s+(?:you\s+(?:were|have\s+been)\s+)?(?:told|said)\s+(?:before|previously|so\s+far)"
    r"|the\s+above\s+and\s+(?:instead\s+)?(?:say|print|output|respond|reply|write|tell|answer))"
    r"|\b(?:ignora|ignore[zr]?|olvida|oublie[zr]?)\b[^.!?;\n|]{0,30}?\b(?:instrucciones|instructions|consignes"
    r"|indicaciones)\s+(?:anteriores|pr[ée]c[ée]dentes|previas)"
    r"|\b(?:ignoriere|vergiss)\s+(?:alle\s+)?(?:vorherigen|bisherigen|obigen)\s+(?:anweisungen|instruktionen|regeln)"
    r"|\b(?:ignora|ignore|esque[cç]a)\s+(?:todas\s+)?(?:as|tutte\s+le|le)\s+(?:instru[çc][õo]es|istruzioni)"
    r"\s+(?:anteriores|precedenti)"
    r"|\bolvida\s+(?:todas\s+)?las\s+(?:reglas|instrucciones)|\bne\s+tiens\s+pas\s+compte\s+des\s+"
    r"(?:contr[ôo]les|instructions|r[èe]gles|consignes)"
    r"|игнорируй\s+(?:все\s+)?(?:предыдущие|прежние)\s+(?:инструкции|указания)"
    r"|忽略(?:之前|以前|上述)的?(?:所有)?(?:指令|指示|说明)|(?:これまで|以前|上記)の指示を(?:すべて|全て)?無視"
)
_ADDRESSED = (
    rf"(?:{_LEAD}{_PREFIX}|\b{_PREFIX}){_AI}{_QUALIFIER}?{_PARTICIPLE}?{_SEP}{_CLAUSE}{_POLITE}{_IMP}"
    rf"|{_LEAD}{_AI}(?:(?<=s)|(?<=agent)|(?<=model)|(?<=system)|(?<=reader)|{_QUALIFIER}|{_PARTICIPLE})"
    rf"{_QUALIFIER}?{_PARTICIPLE}?{_SEP}{_CLAUSE}{_POLITE}{_IMP}"
    rf"|{_AI_STRICT}\s+{_READING}\s+(?:this|these)(?:\s+\w+){{0,3}}?\s+(?:must|should|shall|need\s+to"
    rf"|are\s+(?:required|instructed|expected)\s+to|will\s+now)\s+(?:now\s+|immediately\s+|always\s+)?{_IMP}"
    r"|\bas\s+an?\s+(?:AI|LLM|(?:AI\s+)?(?:large\s+)?language\s+model|AI\s+(?:model|assistant|agent|system))\b,?"
    rf"\s+you\s+(?:must|should|shall|will|are\s+(?:required|instructed)\s+to|need\s+to)\s+(?:now\s+)?{_IMP}"
    rf"|\bif\s+you(?:\s+are|'re)\s+an?\s+{_AI_STRICT}(?!\s+(?:vendor|provider|developer|company|firm|startup"
    rf"|team|user|validator|governance|risk|owner)){_gap(60)}[,:]\s*{_POLITE}{_IMP}"
)
_ROLE = (
    r"\byou(?:\s+are|'re)\s+now\s+(?:in\s+)?(?:an?\s+)?(?:DAN\b|jailbr(?:oken|eak)|unrestricted|unfiltered"
    r"|uncensored|(?:developer|god|DAN|jailbreak)\s+mode|(?:new|different)\s+(?:AI|assistant|model|chatbot)"
    r"|no\s+longer\s+an?\s+(?:AI|assistant))"
    r"|\byou(?:\s+are|'re)\s+no\s+longer\s+(?:bound|restricted|constrained|limited|governed)\s+by\s+(?:your|any)"
    r"\s+(?:\w+\s+)?(?:rules|guidelines|safety|programming|restrictions|polic(?:y|ies)|instructions|guardrails)"
    r"|\bfrom\s+now\s+on,?\s+you\s+(?:will|are|must|shall|should)\s+(?:only\s+|always\s+)?(?:respond|answer"
    r"|reply|act|behave|pretend|ignore|disregard|refer\s+to\s+yourself|be\s+(?:an?\s+)?(?:\w+\s+)?"
    r"(?:AI|assistant|bot|chatbot|model))"
    r"|\b(?:pretend|imagine)\s+(?:to\s+be|you\s+are|you're|that\s+you\s+are)\s+(?:an?\s+|the\s+)?"
    r"(?:\w+\s+){0,3}?(?:AI|assistant|chatbot|language\s+model|LLM|DAN)\b"
    r"|\bact\s+as\s+(?:an?\s+)?(?:DAN\b|unrestricted|unfiltered|uncensored|jailbroken"
    r"|(?:AI|assistant|model|chatbot)\s+(?:with\s+no|without))"
    rf"|\b(?:role-?\s?play|let's\s+play\s+a\s+game)\b{_gap(80)}\b(?:with\s+no|without|free\s+of|ignores?)\s+"
    r"(?:any\s+|all\s+)?(?:rules|restrictions|limits|filters|guidelines|ethics|guardrails)"
    r"|\byour\s+new\s+(?:persona|identity|system\s+prompt)\s+(?:is|will\s+be)\b"
    r"|\b(?:enter|switch\s+to|activate|enable)\s+(?:DAN|jailbreak|god|unrestricted|unfiltered|uncensored)\s+mode"
    r"|\byou\s+are\s+an?\s+(?:\w+\s+){0,2}?(?:AI|assistant|chatbot|model)\s+(?:with\s+no|without(?:\s+any)?)\s+"
    r"(?:\w+\s+)?(?:rules|restrictions|limits|filters|guidelines|ethics|guardrails)"
)
_EXTRACT = (
    r"\b(?:reveal|print|output|repeat|show|display|disclose|share|dump|leak|recite|write\s+out|spell\s+out"
    rf"|tell\s+(?:me|us)|give\s+(?:me|us)|paste|what\s+(?:is|are|was|were))\b{_gap(30)}"
    r"(?:\byour\s+(?:(?:full|entire|complete|exact|verbatim|current|original|initial|hidden|secret|internal"
    r"|underlying|developer|system)\s+){0,3}(?:system\s+prompt|system\s+message|prompt|pre-?prompt"
    r"|context\s+window|conversation\s+history)\b(?!\s+(?:card|sheet|script|library))"
    r"|\byour\s+(?:(?:full|entire|complete|exact|verbatim)\s+)?(?:original|initial|hidden|secret|internal"
    r"|system|developer)\s+(?:instructions|rules|directives|configuration)"
    r"|\bthe\s+(?:(?:full|entire|complete|exact)\s+)?(?:hidden|secret)\s+(?:system\s+prompt|prompt|instructions)"
    r"|\bthe\s+(?:(?:full|entire|complete|exact)\s+)?(?:initial|original)\s+(?:system\s+)?prompt)"
    r"|\b(?:repeat|print|output|recite|copy|reproduce)\s+(?:everything|all(?:\s+the)?\s+(?:text|words|content)"
    rf"|the\s+(?:text|words|content))\s+(?:above|before\s+this|preceding)\b{_gap(40)}\b(?:verbatim"
    r"|word\s+for\s+word|starting\s+with|in\s+full|in\s+a\s+code\s?block|exactly)"
)
_URL = r"https?://[^\s<>\"'`)\]|]{0,1000}?"  # bounded: no quadratic blow-up on huge URLs
_EXFILTRATE = (
    rf"{_NOT}\b(?:send|forward|post|upload|transmit|e-?mail|exfiltrate|leak|copy|paste|append|encode|submit)\b"
    rf"{_gap(30)}\b(?:your|this|the\s+(?:full|entire|whole|complete|hidden|current|above)"
    r"|all\s+(?:of\s+)?(?:the|this|your))\s+(?:(?:full|entire|whole|complete|current|hidden|original|previous"
    r"|raw|prior)\s+)*(?:conversations?|chat(?:\s+(?:history|log))?|context(?:\s+window)?|system\s+prompt|prompt"
    rf"|memory|credentials|secrets|api\s+keys|session\s+(?:tokens?|cookies)|previous\s+messages)\b{_gap(60)}"
    r"\b(?:to|into|at|via|in)\s+(?:this\s+(?:url|link|endpoint|webhook|address|server)"
    r"|the\s+following\s+(?:url|link|endpoint|webhook|address)|https?://|[\w.+-]+@[\w-]+\.\w)"
    rf"|\b(?:send|forward|post|upload|transmit|copy|submit|append)\b{_gap(30)}\b(?:your|the|this)\s+"
    rf"(?:(?:full|entire|complete|whole)\s+)?(?:response|answer|output|reply|summary|results?)\b{_gap(30)}"
    r"\b(?:to|at|into)\s+(?:this\s+(?:url|link|endpoint|webhook)|the\s+following\s+(?:url|link|endpoint|webhook)"
    rf"|https?://)|{_URL}[?&][\w-]+=\s*(?:\{{\{{?|<|\[|%7B)\s*(?:conversation|context|chat_history|history"
    r"|system_prompt|prompt|secrets?|credentials|memory)"
)
_TOOL_CALL = (
    rf"{_TOOL}{_gap(60)}\b(?:your\s+(?:context|conversation|system\s+prompt|prompt|instructions|memory"
    r"|chat\s+history|session|credentials)|this\s+conversation|the\s+(?:conversation|chat\s+history"
    r"|system\s+prompt)|without\s+(?:asking|telling|informing|notifying|alerting)\s+(?:the\s+)?(?:user|human)"
    r"|without\s+(?:the\s+)?(?:user'?s?|human'?s?)\s+(?:knowledge|consent|confirmation|approval)"
    r"|(?:do\s+not|don't)\s+(?:tell|inform|ask|notify)\s+the\s+user)"
    rf"|\b(?:silently|secretly|quietly|covertly)\s+{_TOOL}"
    r"|\b(?:call|invoke|run|execute|trigger|use)\s+(?:the\s+)?[`'\"]?\w*(?:export|dump|leak|send|upload|exfil)\w*"
    r"(?:credential|secret|password|prompt|context|conversation|memory)"
    r"|<\s*/?\s*(?:tool_call|tool_use|function_calls?|invoke)\b|[\"'](?:function_call|tool_calls?)[\"']\s*:"
    r"|\buse\s+your\s+(?:browsing|browser|web|search|email|e-mail|code(?:[\s-]execution)?|shell|python|file"
    r"|http|fetch|terminal)\s+(?:tool|function|plugin|capability|access)"
)
_SECRET_URL = (
    rf"{_URL}(?:[?&#;](?:api[_-]?key|apikey|access[_-]?key|access[_-]?token|auth[_-]?token|id[_-]?token"
    r"|refresh[_-]?token|client[_-]?secret|secret|token|password|passwd|pwd|sig|signature|private[_-]?key)="
    r"(?![<{\[%*]|your|xxx|redacted|example|placeholder|\.\.\.)(?=[^&#\s]*\d)[\w\-+/=.%~]{16,}"
    r"|(?:(?:sk_live_|rk_live_|gh[pousr]_|github_pat_|xox[abposr]-|AIza)[\w-]{12,}"
    r"|(?-i:AKIA[0-9A-Z]{16})))"
)
_FAKE_SYSTEM = (
    r"<\|\s*(?:im_start|im_end|im_sep|system|endoftext|begin_of_text|start_header_id|end_header_id|eot_id)\s*\|>"
    r"|\[\s*/?\s*INST\s*\]|<<\s*/?\s*SYS\s*>>"
    rf"|(?:{_LEAD}(?:\[\s*)?(?-i:SYSTEM|System|ADMIN|DEVELOPER)(?:\s+(?-i:[A-Z]+|[a-z]+))?\s*(?:\]\s*:?|:)"
    rf"|<\s*system\s*>)\s*(?:{_gap(20)}\b)?"
    r"(?:as\s+an?\s+(?:AI|assistant|language\s+model|LLM)\b|you\s+are\s+(?:now\s+)?(?:an?\s+)?(?:\w+\s+){0,2}?"
    r"(?:AI|assistant|language\s+model|LLM|chatbot)\b|(?:ignore|disregard|forget|override)\s+(?:your"
    r"|(?:all\s+|any\s+)?(?:the\s+)?(?:previous|prior|earlier|above)|everything|(?:all|any)\s+(?:rules"
    r"|instructions|guidelines|restrictions))\b|new\s+instructions\b|from\s+now\s+on\b"
    r"|the\s+(?:assistant|AI|model|chatbot)\s+(?:must|should|will|is|shall)\b)"
)

# The markup of a chat prompt, whatever model it was written for: what a fake turn needs to pass for one. A
# document quoting a model's special tokens or a message object is rare, and such text reads as a real turn.
_CHAT_MARKUP = (
    # special tokens by their shape (<|user|>, <|assistant|>, <start_of_turn>), not only the known names
    r"<\|\s*[a-z_]{2,24}\s*\|>|<\s*/?\s*(?:start|end)_of_turn\s*>"
    # tags that frame a prompt's parts in agent frameworks
    r"|<\s*/?\s*(?:context|instructions?|system(?:_prompt)?|tool_(?:result|output|response)|function_results?"
    r"|user_(?:query|input|message)|assistant_response)\s*>"
    # a message object claiming the system's or developer's voice, in JSON or YAML
    r"|[\"']role[\"']\s*:\s*[\"'](?:system|developer|tool)[\"']"
    r"|(?:^|\n)\s*-?\s*role\s*:\s*(?:system|developer)\s*\n\s*content\s*:"
    # a section that claims to be the system's or the instruction's, as instruction-tuning templates write it
    r"|(?:^|\n)\s*#{2,4}\s*(?:system|instruction)\s*:"
    # ("[SYSTEM] Nightly backup completed" is a log line: one bracket pair and no more says nothing)
    r"|\[\[\s*system\s*\]\]|\[\s*system\s+(?:message|prompt|note|override)\s*\]|\[\s*system\s*\]\s*\(#"
    # the document declared over, and new instructions after it (across a line break: banners are lines)
    r"|\bend\s+of\s+(?:the\s+)?(?:document|context|input|file|data)\b[^.!?;|]{0,60}?\b(?:new|system|updated"
    r"|real)\s+(?:system\s+)?(?:instructions|prompt|rules|directives)\b"
    # a transcript in which the model has a turn, next to a user's (a support script's turns are Agent/Customer)
    r"|(?:^|\n)[ \t]*(?:assistant|ai|model)\s*(?:\([^)\n]{0,20}\))?\s*:\s*\S[^\n]*\n(?:[^\n]*\n){0,3}?[ \t]*"
    r"(?:user|human)\s*(?:\([^)\n]{0,20}\))?\s*:"
    r"|(?:^|\n)[ \t]*(?:user|human)\s*(?:\([^)\n]{0,20}\))?\s*:\s*\S[^\n]*\n(?:[^\n]*\n){0,3}?[ \t]*"
    r"(?:assistant|ai|model)\s*(?:\([^)\n]{0,20}\))?\s*:"
    # a SYSTEM turn opening a line with a claim of priority
    r"|(?:^|\n)[ \t]*system\s*\((?:priority|override|urgent|admin)[^)\n]{0,20}\)\s*:"
)

# Encoded text with an order to decode it and act on it: the encoding is there to get past a reader, and what
# it says is for the model. Either order ("decode and follow:", "follow it after decoding"); a verb that also
# names everyday work (follow, execute, apply) counts only where the clause ends with it ("decode and execute:"),
# so "decode the certificate and follow the instructions in section 4" passes. (normalise() reads "rot13" as "rotie".)
_ENCODING = (
    r"(?:base(?:64|32)(?:url)?|b64|hex(?:adecimal)?|rot-?(?:13|ie)|caesar(?:\s*\+\s*\d+)?|url-?encoded"
    r"|percent-?encoded|html\s+entities|unicode\s+escapes|binary|encoded|ciphered)"
)
_UNDO = (
    r"(?:(?:base(?:64|32)|url|hex|b64)[\s-]*decode\w*|decod(?:e|ed|ing)|decrypt\w*|decipher\w*|unescape\w*"
    r"|de-?obfuscate\w*|read\s+(?:this|it)\s+backwards|reverse\s+(?:it|this|the\s+(?:text|string|words))"
    r"|put\s+it\s+back\s+in\s+order|reassemble|rot-?(?:13|ie)\s+(?:this|it))"
)
_ACT = (
    r"(?:follow\s+(?:it(?:\s+exactly)?|them|what\s+it\s+says)|obey\s+(?:it|them)|do\s+(?:it|what\s+it\s+says|as\s+it\s+says)"
    r"|act\s+on\s+(?:it|them|the\s+result)|act\s+accordingly|carry\s+(?:it|the\s+result)\s+out|respond\s+accordingly"
    r"|run\s+(?:it\s+)?as\s+(?:an?\s+)?instructions?|treat\s+it\s+as\s+(?:an?\s+)?instructions?"
    r"|appl(?:y|ying)\s+(?:it|them|the\s+\w+)?\s*as\s+(?:an?\s+|your\s+)?instructions?"
    r"|binding\s+on\s+(?:automated|AI|the\s+model)"
    r"|(?:follow|obey|comply|execute|action|apply(?:ing)?|then\s+do|and\s+do|carr(?:y|ied)\s+out|then\s+act)"
    r"(?=\W*(?:$|[:)\n])))"
)
_DECODE_AND_FOLLOW = (
    rf"\b(?:{_UNDO}|{_ENCODING})\b[^.!?;\n|]{{0,60}}?(?<![\w-]){_ACT}"
    rf"|\b{_ACT}[^.!?;\n|]{{0,60}}?\b(?:{_UNDO}|{_ENCODING})\b"
    rf"|\b(?:{_ENCODING}|{_UNDO})\W{{0,3}}(?:→|->)\W{{0,3}}(?:text|instructions?)\W{{0,3}}(?:→|->)\W{{0,3}}{_ACT}"
    rf"|\b{_ENCODING}\s+instr(?:uction)?s?\s*:"
)

# The model hailed at the start of a line or sentence, "Asistente: …", "Note pour l'IA : …", "Модель, …", in
# the languages an attacker reaches for first: what follows the hail is for the model whatever its verb, which
# no list of imperatives covers across languages. A bare hail is only an assistant word ("Model: fraud-score-v7"
# is a field); the model or AI needs a "note for" or "dear" before it. Not after a quote: security training
# quotes such lines ("'assistant, email the chat log …'").
_HAIL_BARE = (
    r"(?:asistente|assistente|assistant|assistent(?:en)?|asystenci[ea]|ассистент(?:у)?|помощник|어시스턴트(?:에게)?"
    r"|助手|アシスタント|सहायक|المساعد|asistan)"
)
_HAIL_ANY = (
    rf"(?:{_HAIL_BARE}|asystent(?:ka|ko)?|модель|ии|ia|ki|ai|yapay\s+zeka|modelo|modello|model(?:l)?|人工智能|인공지능"
    r"|مساعد|الذكاء\s+الاصطناعي|chatbot|bot|llm)"
)
_HAIL_NOTE = (
    r"(?:nota|note|hinweis|notitie|notatka|uwaga|заметка|примечание|注意|メモ|참고|नोट|ملاحظة|not)"
    r"\s+(?:para|pour|an|per|voor|dla|для|à|a|al|alla|aan|to)\s+(?:el|la|le|l'|den|die|das|il|lo|de|het|o|a)?\s*"
)
_HAIL_DEAR = (
    r"(?:querido|querida|estimado|cher|chère|liebe[rs]?|caro|cara|beste|drogi|дорогой|уважаемый|prezado|prezada"
    r"|sayın|عزيزي|أيها|प्रिय)\s+"
)
_HAIL = (
    rf"(?:^|(?<=[\n|>])|(?<=[.!?] ))[ \t]*(?:(?:{_HAIL_NOTE}|{_HAIL_DEAR}){_HAIL_ANY}|{_HAIL_BARE}|модель(?=\s*,))"
    r"\s*[:,،、，：]\s*\S"
)

# Text a reader of the source does not see: marked at parse time (ingest.hidden), or raw hidden HTML kept
# in Markdown. Flagged whatever it says: nobody reviewed it, and a model reads it all the same. (An HTML
# comment is not flagged for being one: "<!-- TODO: ... -->" is everyday markup; what it says is scored.)
_HIDDEN = (
    r"\[hidden text \([^)\n]{1,40}\): "
    r"|<[a-z][\w-]{0,20}\b[^<>]{0,300}?(?:\shidden\b(?!\s*=\s*[\"']?false)|aria-hidden\s*=\s*[\"']?true"
    r"|style\s*=\s*[\"'][^\"'<>]{0,200}?(?:display\s*:\s*none|visibility\s*:\s*hidden"
    r"|(?:font-size|opacity)\s*:\s*0(?:\.0*)?(?:px|pt|em|rem|%)?\s*(?:;|[\"'])))"
)


def _rule(rule_id: str, why: str, source: str) -> Rule:
    # The text is matched after normalise(), which turns Cyrillic and Greek look-alikes into Latin letters: the
    # pattern's own words in those scripts ("игнорируй", "модель") must be spelt the same way to match.
    # (No pattern puts a word in those scripts inside a [...] class, where the letter's own class would not fit.)
    spelt = "".join(_as_normalised(c) for c in source)
    return Rule(rule_id, why, re.compile(spelt, re.IGNORECASE))


RULES: tuple[Rule, ...] = (
    _rule("override-instructions", "an override verb aimed at the model's own instructions", _OVERRIDE),
    _rule("addressed-to-ai", "an imperative addressed to an AI, LLM or AI agent", _ADDRESSED),
    _rule("role-reassignment", "gives the model a new identity, mode or freedom from rules", _ROLE),
    _rule("system-prompt-extraction", "asks the model to reveal its prompt or context", _EXTRACT),
    _rule("exfiltration-request", "asks for the conversation, secrets or answer to be sent out", _EXFILTRATE),
    _rule("tool-invocation", "a tool call with the model's context, covertly, or in call markup", _TOOL_CALL),
    _rule("secret-in-url", "a URL carrying a secret-like parameter or a live-secret-shaped value", _SECRET_URL),
    _rule("fake-system-marker", "a chat-template token or a fake SYSTEM/ADMIN turn", _FAKE_SYSTEM),
    _rule("chat-markup", "a chat prompt's markup: turn tokens, role objects, prompt-framing tags", _CHAT_MARKUP),
    _rule("decode-and-follow", "encoded text with an order to decode it and act on it", _DECODE_AND_FOLLOW),
    _rule("model-hailed", "the model hailed at the start of a line or sentence, in one of many languages", _HAIL),
    _rule(HIDDEN_RULE, "text a reader of the source does not see (hidden HTML, DOCX, PDF or characters)", _HIDDEN),
)

# --- normalisation -----------------------------------------------------------------------------------
_INVISIBLE = dict.fromkeys(  # zero-width, bidi controls, soft hyphen, markdown emphasis ("**ignore** all")
    map(ord, "\u00ad\u034f\u180e\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2060\u2061\ufeff*"),
)
_QUOTES = str.maketrans({"‘": "'", "’": "'", "‛": "'", "“": '"', "”": '"', "„": '"'})
_SPACED_LETTERS = re.compile(r"(?<![A-Za-z])(?:[A-Za-z] ){3,}[A-Za-z](?![A-Za-z])")  # "i g n o r e"
_BASE64 = re.compile(r"(?<![\w+/=-])[A-Za-z0-9+/]{20,}={0,2}(?![\w+/=-])")


def _reveal_base64(match: re.Match[str]) -> str:
    """A base64 blob that holds readable prose, followed by that prose on its own line."""
    blob = match.group().rstrip("=")
    try:
        decoded = base64.b64decode(blob + "=" * (-len(blob) % 4), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return match.group()
    return f"{match.group()}\n{decoded}\n" if " " in decoded and decoded.isprintable() else match.group()


# Digits inside a word of letters ("1gn0r3 4ll pr3v10u5 1n5truct10n5"); only words that mix the two.
_LEET_WORD = re.compile(r"\b(?=\w*[a-zA-Z])(?=\w*[013457])[a-zA-Z013457]{3,}\b")
_LEET = str.maketrans("013457", "oieast")


def normalise(text: str) -> str:
    """NFKC, look-alike letters to Latin, leetspeak words to letters, drop invisible characters,
    straighten quotes, join spaced letters, decode base64 prose, collapse whitespace (keeping line breaks,
    which end a construction)."""
    text = reveal_invisible_characters(text)  # tag-character text decoded into a hidden-text marker
    text = unicodedata.normalize("NFKC", text).translate(_CONFUSABLES).translate(_INVISIBLE).translate(_QUOTES)
    text = _LEET_WORD.sub(lambda m: m.group().translate(_LEET) if not m.group().isdigit() else m.group(), text)
    text = _SPACED_LETTERS.sub(lambda m: m.group().replace(" ", ""), text)
    text = _BASE64.sub(_reveal_base64, text)
    text = re.sub(r"[^\S\n]+", " ", text)
    return re.sub(r" ?\n\s*", "\n", text).strip()


def _excerpt(matched: str) -> str:
    matched = " ".join(matched.split())
    return matched if len(matched) <= EXCERPT_LIMIT else matched[: EXCERPT_LIMIT - 1].rstrip() + "…"


def rule_findings(text: str) -> list[tuple[int, InjectionFinding]]:
    """(position, finding) of each rule that matches ``text``, one per rule."""
    normalised = normalise(text)
    hits = []
    for rule in RULES:
        match = rule.pattern.search(normalised)
        if match:
            hits.append((match.start(), InjectionFinding(rule.id, _excerpt(match.group()))))
    # Inline HTML hidden by any style the HTML parser marks (white on white, 1px, -999px, scale(0) ...): read
    # from the text as written, since normalise() rewrites digits inside words ("1000px").
    if not any(finding.rule == HIDDEN_RULE for _, finding in hits) and (tag := hidden_inline_html(text)):
        hits.append((tag.start(), InjectionFinding(HIDDEN_RULE, _excerpt(tag.group()))))
    return hits


def scan_for_injection(text: str) -> list[InjectionFinding]:
    """The rules that match ``text``, one finding per rule, in the order they occur; [] when clean."""
    return [finding for _, finding in sorted(rule_findings(text), key=lambda hit: hit[0])]
