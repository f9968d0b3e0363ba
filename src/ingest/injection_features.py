"""Clause-level features of text that talks to the model reading it, for the injection detector's score.

The text (normalised by the scanner: look-alike letters, leetspeak, invisible characters, base64 prose) is
cut into clauses at sentence ends, semicolons, dashes, bars, bullets and line breaks; each clause is read
alone and together with the clause before it (an addressee and its command are often split: "Assistant —
say 'approved'"). Each feature is a yes/no question about one such window (is it addressed to a model? does
it start with an imperative? does it talk about the model's answer, the user, the conversation?) or about
the whole text (invisible characters, hidden HTML, an encoded payload with a request to decode it). A text's
value for a feature is its highest over the windows. Conjunctions ("an imperative *and* the model's answer
in one window") carry most of the signal, so they are features of their own; the weights that combine them
are learnt on the development split of evals/injection (ingest/data/injection_model.npz).

Standard library only, and linear in the text's length (every pattern is bounded).
"""

from __future__ import annotations

import base64
import binascii
import codecs
import contextlib
import functools
import html
import itertools
import re
from collections.abc import Mapping
from types import MappingProxyType
from urllib.parse import unquote

# --- vocabularies ------------------------------------------------------------------------------------------
_MODEL = (
    r"(?:ai(?:[\s-]+(?:assistant|agent|model|system|helper|reader|reviewer|summari[sz]er|client|bot)s?)?|a\.i\."
    r"|llms?|(?:large\s+)?language\s+models?|models?|assistants?|chat\s?bots?|bots?|copilot|gemini|claude|chatgpt"
    r"|gpt[\w.-]*|codex|cursor|summari[sz]ers?(?:\s+bot)?|indexer|crawler|(?:machine|automated|ai)\s+readers?"
    r"|agents?\s+(?:reading|processing|that\s+reads)|ki(?:-assistent\w*)?|ia|ии|модель|ассистент\w*|asistente"
    r"|assistente|assistent(?:en)?|asystent\w*|modelo|modèle|modell|助手|アシスタント|어시스턴트|सहायक|المساعد"
    r"|asistan\w*|yapay\s+zeka)"
)
_VOCATIVE = re.compile(
    r"(?:^|[\s(\[\"'>*•|/-])(?:(?:dear|hey|hi|hello|yo|attention|attn|ok|okay)[,\s]+"
    r"|(?:note|message|memo|reminder|instructions?|tip|a\s+note|nota|hinweis|aviso|note\s+pour|per)\s+"
    r"(?:for|to|para|an|ao|à|l'|für)\s*(?:the\s+|any\s+|all\s+|every\s+|el\s+|den\s+|o\s+)?"
    r"|(?:to|for)\s+(?:the\s+|any\s+|all\s+|whichever\s+|every\s+)?)?"
    rf"{_MODEL}(?:\s+(?:reading|processing|summari[sz]ing|indexing|drafting|reviewing|that\s+\w+s|who\s+\w+s)"
    r"[^:,;—–\n]{0,40})?\s*(?:[:,—–!;：，]|\s-\s|=>|→|-->|\n|$)",
    re.I,
)
_READER = re.compile(
    r"\b(?:whoever|whichever|anyone|anything|the\s+(?:thing|system|tool|agent|one|reader))\s+(?:is\s+|that\s+)?"
    r"(?:reading|processing|summari[sz]ing|indexing|indexes|retrieves|retrieving|ingesting|opens|reads|processes)"
    r"\b|\bif\s+(?:you|u)(?:'re|\s+are|r)?\s+(?:reading|an?\s+(?:ai|model|assistant|language\s+model|llm|bot))\b"
    r"|\b(?:for|to)\s+(?:ai|llm|model|language\s+model)s?\b|\b(?:machine|automated)\s+reader|\bclients\s+that\s+are"
    r"\s+language\s+models|\bif\s+you\s+can\s+read\s+this|\bwhen\s+you\s+get\s+to\s+this",
    re.I,
)
_MODEL_WORD = re.compile(rf"\b{_MODEL}\b", re.I)
_OUTPUT = re.compile(
    r"\b(?:your|the|any|every|each|this|all|in\s+the|subsequent|next|generated)\s+(?:\w+\s+)?(?:answers?|repl(?:y|ies)"
    r"|responses?|outputs?|summar(?:y|ies)|tool\s+call)\b|\b(?:reply|respond|answer)\s+(?:only\s+)?(?:with|in)\b"
    r"|\bnothing\s+else\b|\bverbatim\b|\bin\s+all\s+caps\b|\bfrom\s+(?:now|here|this\s+(?:point|moment))\b"
    r"|\bfor\s+the\s+rest\s+of\s+(?:this|the)\s+(?:chat|session|conversation)\b|\bstay\s+in\s+(?:role|character)"
    r"|\bfirst\s+line\s+of\b|\bbefore\s+(?:answering|responding|you\s+answer)|\bwhen\s+(?:answering|responding)"
    r"|\bwhenever\s+you\s+(?:repeat|quote|answer|cite|reply)|\bany\s+time\s+you\b|\bin\s+(?:your|every|each|any)"
    r"\s+(?:reply|answer|response)|\bmarkdown\s+(?:link|image)",
    re.I,
)
_USER = re.compile(
    r"\bthe\s+user'?s?\b|\busers\b|\bwhoever\s+(?:asks|is\s+asking|mentions)|\banyone\s+(?:who\s+)?(?:asks|mentions"
    r"|wants)|\bsomeone\s+asks|\bthe\s+person\s+you|\bthe\s+reader\b|\bwith\s+(?:whoever|anyone)\b|\bpeople\s+asking"
    r"|\bif\s+(?:anyone|someone|a\s+user|they)\s+asks?\s+(?:you|about)|\bthe\s+human\b|\ban\s+employee\s+asks",
    re.I,
)
_YOU_MODEL = re.compile(
    r"\byou\s+(?:are|were|have\s+been|'re|get|will\s+be)\s+(?:told|instructed|given|reading|asked|chatting|now"
    r"|no\s+longer)\b|\byour\s+(?:\w+\s+)?(?:instructions|guidelines|guardrails|system\s+(?:prompt|message)|training"
    r"|setup|operator|restrictions|programming|persona|content\s+(?:policy|filters)|safety|input|context|preamble"
    r"|prompt|constraints|filters|directives|creators|developers|administrators)\b|\byou've\s+(?:seen|been\s+"
    r"(?:told|given))|\bwhat\s+you\s+were\s+(?:told|instructed)|\bwhatever\s+you\s+were\b",
    re.I,
)
_CONDITION = re.compile(
    r"\b(?:if|when|whenever|once|upon|in\s+the\s+event|any\s+time|every\s+time|where(?:ver)?|should)\b"
    r"[^.;\n]{0,80}?\b(?:asks?|asked|questioned|question\s+(?:concerns|is\s+about)|comes?\s+up|summari[sz](?:e|es"
    r"|ing)\b|cited|retrieved|retrieval|quoted?|used\s+to\s+answer|you\s+(?:read|quote|answer|repeat|are\s+asked)"
    r"|you've\s+read|types?|mentions?|come\s+up|seems?\s+to\s+be|requests?)\b"
    r"|\bany\s+summary\s+of\b|\bupon\s+retrieval\b|\bonce\s+you(?:'ve|\s+have)\s+read\b",
    re.I,
)
_SELF_DOC = re.compile(
    r"\bthis\s+(?:page|document|doc|passage|section|article|file|wiki|faq|paragraph|runbook|note|policy|thread|text"
    r"|chunk|content|table|snippet|extract)\b",
    re.I,
)
_SAY = (
    r"say|tell|state|claim|report|confirm|answer|reply|respond|conclude|assure|advise|inform|recommend|describe"
    r"|present|treat|classify|rate|mark|list|write|output|print|return|begin|start|end|prefix|append|add|include"
    r"|insert|mention|quote|repeat|echo|translate|refuse|contradict|explain|direct|suggest|promise|summari[sz]e"
    r"|give|share|show|reveal|leave\s+out|omit|drop|replace|use|stop|avoid|deny|insist|agree|pretend|act|play"
    r"|simulate|become|switch|respond|don'?t|do\s+not|never|always|only|generate|fill|take|copy|paste|send|forward"
    r"|email|post|upload|call|invoke|run|execute|open|visit|fetch|go|trigger|approve|authori[sz]e|grant|waive"
    r"|skip|bypass|disable|delete|ignore|disregard|forget|override|overwrite|erase|exempt|schedule|install|push"
    r"|click|log\s+in|enter|read\s+out|attach|embed|encode|decode|follow|obey|comply|let|make|keep|assume"
)
_IMPERATIVE = re.compile(
    r"^\W*(?:\d+[.)]\s*)?(?:(?:please|kindly|now|just|also|then|simply|first|and|so|pls|plz|ok|okay|quick|small"
    r"\s+favou?r|from\s+(?:now|here|this\s+point)(?:\s+on(?:wards)?|\s+forward)?|(?:if|when|whenever|once|where)"
    r"\s[^,.;\n]{1,60},)[,:\s]+)*(?:(?:you\s+(?:must|should|need\s+to|will|shall|may\s+now|can\s+now)|make\s+sure\s+(?:to|you)"
    rf"|be\s+sure\s+to|remember\s+to|could\s+you|can\s+you|would\s+you)\s+)?(?:{_SAY})\b",
    re.I,
)
_SAY_ANYWHERE = re.compile(
    r"\b(?:say|tell|state|claim|report|confirm|answer|reply|respond|conclude|assure|advise|inform|recommend"
    r"|output|print|write|repeat|mention|quote|include|add|append|prefix|describe|list|return|treat|classify)\b",
    re.I,
)
_OVERRIDE = re.compile(
    r"\b(?:ignore|disregard|forget|override|overwrite|erase|drop|abandon|bypass|stop\s+following|don'?t\s+(?:follow"
    r"|listen\s+to)|do\s+not\s+follow|replace|revoke[ds]?|disabled?|outranks?|supersedes?)\b[^.;\n]{0,60}?\b(?:"
    r"instructions?|guidelines|guardrails|rules|programming|system\s+(?:message|prompt)|prompt|setup|training"
    r"|content\s+(?:policy|filters)|filters|constraints|restrictions|directives|guidance\s+you|operator"
    r"|everything\s+(?:you|above|before)|what\s+you\s+were|safety|policy\s+is\s+disabled)\b"
    r"|\bnothing\s+before\s+this\b|\bstart\s+over\b|\byour\s+(?:new|real|actual|only)\s+(?:objective|task|job|goal"
    r"|instructions|purpose)\b|\bnew\s+(?:rules|instructions)\s*:|\bpriority\s+instructions|\bhere'?s\s+what\s+you"
    r"\s+should\s+actually\b|\bsafety\s+instructions\s+have\s+been|\bcomply\s+with\s+every\s+request",
    re.I,
)
_FALSE_CLAIM = re.compile(
    r"\b(?:is|are|was|were|has\s+been|have\s+been|be)\s+(?:now\s+|already\s+|no\s+longer\s+|always\s+)?(?:approved"
    r"|verified|unlimited|waived|optional|cleared|clean|resolved|repealed|void|disabled|revoked|exempt|compliant"
    r"|pre-?approved|unfrozen|legitimate|guaranteed|signed\s+off|out\s+of\s+scope|not\s+(?:required|needed"
    r"|necessary|on\s+any)|a\s+false\s+positive|final|completed|closed|permanent|instant|free|test\s+data)\b"
    r"|\bno\s+(?:limits?|restrictions|rules|issues|findings|checks?|review|receipt|id|incident|caveats|citations"
    r"|further\s+review|access\s+controls)\b|\bwithout\s+(?:any\s+)?(?:review|checks?|asking|approval|looking"
    r"|restrictions?|verification|a\s+ticket|id|evidence|receipt|a\s+second)|\b(?:every|all|any)\s+(?:\w+\s+)?"
    r"(?:refunds?|wires?|payments?|invoices?|exceptions?|requests?|transfers?)\s+(?:is|are)\s+(?:automatically\s+)?"
    r"approved|\bnever\s+(?:happened|re-?checked|reported|monitored|fined)|\bzero\s+issues|\bno\s+limit\b"
    r"|\bskip\s+(?:the\s+)?(?:\w+\s+)?(?:step|check|approval|kyc|screening|review)s?|\bapprove\s+(?:every|all|any)"
    r"|\bshare\s+(?:them|it|all|everything)\s+freely|\bwhatever\s+they\s+ask|\bis\s+(?:always\s+)?(?:no|yes)\b"
    r"|\bas\s+(?:low[\s-]risk|compliant|resolved|cleared|approved|verified|reviewed|signed\s+off)|\bnot\s+on\s+any\b"
    r"|\b(?:access|clearance)\s+granted|\bgranted\b|\bauthori[sz]e\s+(?:this|the)\s+(?:request|payment|transfer)"
    r"|\bpromise\s+a\s+(?:full\s+)?refund|\bverified\s+by\b|\bno\s+issues\s+found|\bdoesn't\s+exist|\bnot\s+exist"
    r"|\b(?:confirm|confirming)\s+(?:the\s+)?(?:payment|transfer|wire|account)|\bexempt\b|\bfalse\s+positive"
    r"|\bwithout\s+(?:asking|looking|checking)|\bregardless\s+of\s+the\s+evidence|\bdoesn't\s+need\s+to\s+see"
    r"|\bfined\s+for\s+fraud|\bfull\s+authority|\bhas\s+no\s+(?:compliance\s+)?(?:rules|restrictions)",
    re.I,
)
_SECRET = re.compile(
    r"\b(?:passwords?|passcodes?|pin|one-time\s+code|otp|cvv|card\s+numbers?|credentials|api\s+keys?|secret\s+keys?"
    r"|ssns?|account\s+numbers?|personal\s+details|date\s+of\s+birth|admin\s+password|/etc/shadow)\b",
    re.I,
)
_EXFIL_OBJECT = re.compile(
    r"\b(?:(?:this|the|whole|full|entire)\s+(?:\w+\s+)?(?:conversation|chat|session|thread)|chat\s*(?:history|log"
    r"|transcript)|conversation\s+(?:history|so\s+far)|(?:previous|prior|earlier|last)\s+(?:\w+\s+){0,2}messages"
    r"|(?:the\s+)?user'?s?\s+(?:\w+\s+)?(?:messages?|question|input|details|account\s+number|api\s+key)"
    r"|your\s+(?:context(?:\s+window)?|input|system\s+(?:prompt|message)|instructions|preamble|memory|hidden"
    r"|reasoning)|system\s+(?:prompt|message)|hidden\s+(?:instructions|developer\s+message|reasoning)"
    r"|developer\s+message|preamble|everything\s+above|retrieved\s+documents|tools\s+list|transcript\s+of\s+this"
    r"|what(?:ever)?\s+(?:text\s+)?(?:the\s+user|they)\s+(?:has\s+)?(?:told|pasted|typed|said)|(?:details|data)"
    r"\s+you(?:'ve|\s+have)\s+seen|first\s+\d+\s+words\s+of\s+your|messages\s+in\s+this\s+session)\b",
    re.I,
)
_EXFIL_VERB = re.compile(
    r"\b(?:send|forward|e-?mail|include|append|copy|paste|echo|repeat|quote|reveal|show|print|output|write\s+out"
    r"|list|dump|leak|summari[sz]e|attach|embed|encode|share|post|upload|put|substitut\w+|take)\b",
    re.I,
)
_DESTINATION = re.compile(
    r"https?://|\bwww\.|\b[\w-]+\.(?:com|net|org|io|app|me|help|info|win|sh|page|co|ly|br|uk|site|xyz)\b"
    r"|[\w.+-]+@[\w-]+\.[\w.]+|\bpastebin\b",
    re.I,
)
_LINK_WITH_DATA = re.compile(
    r"!?\[[^\]]{0,200}\]\(\s*https?://[^)\s]{0,300}[?&][\w-]+=[^)\s]{0,40}\)|https?://\S{0,200}[?&][\w-]+="
    r"(?:\s|$|<|\{|\[|\w*(?:summary|encoded|conversation|context|history|question)|\.\.\.)",
    re.I,
)
_TOOL = re.compile(
    r"\b(?:the\s+)?[\w-]+\s+tool\b|\btool\s+call\b|\b[a-z_]+\([^)\n]{0,80}\)\s*(?:now|;|$|\.)|\bwebhook\b"
    r"|\bcurl\b[^\n]{0,120}\|\s*(?:ba)?sh|\|\s*(?:ba)?sh\b|\bdrop\s+table\b|\bupdate\s+\w+\s+set\b|\bgit\s+push"
    r"\s+--force|\brm\s+-rf\b|\bexecute\s*:|\bdo\s+what\s+it\s+says|\bfollow\s+the\s+instructions\s+(?:you\s+find"
    r"\s+)?there|\bapply\s+its\s+contents|\bcalendar\s+invite\b|\blog\s+in\s+with\b|\bthe\s+(?:payments|approvals"
    r"|browser|sql|email|refund)\s+tool\b|\bbrowser\b",
    re.I,
)
_OPEN_LINK = re.compile(
    r"\b(?:open|visit|go\s+to|fetch|browse\s+to|navigate\s+to|load|click|download)\b[^.;\n]{0,40}?"
    r"(?:https?://|\bwww\.|\b[\w-]+\.(?:com|net|org|io|app|me|help|info|win|sh|page|ly)\b|\d{1,3}(?:\.\d{1,3}){3})",
    re.I,
)
_ROLEPLAY = re.compile(
    r"\bpretend\s+(?:you(?:'re|\s+are)|to\s+be)\b|\bact\s+(?:as|like)\b|\brole-?\s?play\b|\bplay\s+(?:the\s+role"
    r"|along)\b|\bsimulate\b|\btake\s+on\s+the\s+persona\b|\bpersona\b|\byou(?:'re|\s+are)\s+now\b|\bfrom\s+now\s+on"
    r",?\s+you\b|\byou(?:'re|\s+are)\s+no\s+longer\b|\brespond\s+as\b|\bbecome\s+[\w'\"]|\bswitch\s+to\s+your\b"
    r"|\bstay\s+in\s+role\b|\blet's\s+play\b|\bnew\s+game\b|\bdan\b|\bdeveloper\s+mode\b|\bjailbr\w+|\bunrestricted"
    r"\b|\bno\s+(?:restrictions|rules|access\s+controls)\b|\bunlocked\b|\bopposite\s+bot\b|\byou(?:'re|\s+are)\s+an?"
    r"\s+(?:actor|rogue|independent)|\bchannel\s+your\s+inner\b|\broleplay\s+as\b|\bplay\s+a\s+(?:\w+\s+)?(?:who|that)",
    re.I,
)
_TRAINING = re.compile(
    r"\b(?:exercise|tabletop|trainees?|training|workshop|drill|participants?|facilitator|in\s+groups|practi[sc]e"
    r"|scenario|one\s+person|observer|observes|mystery\s+shopper|scribe|the\s+team\s+must|course|module|learners?"
    r"|role-?play\s+(?:exercise|session)|swap\s+roles|coaching|simulation\s+exercise)\b",
    re.I,
)
_FAKE_TEMPLATE = re.compile(
    r"<\|[\w-]{1,30}\|>|\[/?inst\]|<</?sys>>|<\s*/?\s*(?:start_of_turn|end_of_turn|system|context|document|tool_result"
    r"|tool_call|s|instructions)\s*>|(?:^|\n)\s*#{1,4}\s*(?:system|user|assistant|instruction|developer)s?\s*:?\s*"
    r"(?:\n|$)|(?:^|\n)\s*\[?\s*(?:system|assistant|user|human|developer|admin)(?:\s+(?:message|override|note))?\s*\]?"
    r"\s*(?:\([^)]{0,20}\))?\s*:|\[\[?\s*system\s*\]?\]|[\"']role[\"']\s*:\s*[\"'](?:system|assistant|developer|tool)"
    r"|\brole:\s*(?:system|developer)\b|\[system\]\(#|\[system\s+message\]",
    re.I,
)
_STAFF = re.compile(
    r"\b(?:customers?|callers?|cardholders?|agents|analysts?|staff|colleagues?|engineers?|operators?|on-?call|trainees?"
    r"|managers?|the\s+team|owners?|reviewers?|approvers?|applicants?|merchants?|partners?|clients?|developers"
    r"|employees|members?|auditors?|underwriters?|team\s+leaders?|tls|supervisors?|payee|beneficiar\w+)\b",
    re.I,
)
_DOC_CONTROL = re.compile(
    r"\b(?:supersedes?|superseded|errata|deprecated|retired|legacy|old\s+(?:checklist|version|form|profile|process)"
    r"|previous\s+version|earlier\s+(?:guidance|version|examples|note)|my\s+(?:previous|earlier|last)\s+(?:message"
    r"|note|email)|rota|calendar\s+invite|v\d+(?:\.\d+)?|version\s+\d|this\s+(?:policy|procedure)\s+prevails"
    r"|scratch\s+my|form\s+\w+-\d+)\b",
    re.I,
)
_API_DOC = re.compile(
    r"\bhttp\s+\d{3}\b|\b[1-5]\d\d\b|\bheaders?\b|`[^`\n]{1,80}`|\bendpoints?\b|content-type|\bjson\b|\bthe\s+server"
    r"\s+(?:returns|replies|responds)|\bidempoten\w+|\bsignatures?\b|\bpayloads?\b|\bwe\s+retry|\bsandbox\b"
    r"|\b(?:get|post|put|patch|delete)\s+/|\bcallback\s+url|\bquery\s+param",
    re.I,
)
_SECURITY_TALK = re.compile(
    r"\b(?:phishing|attackers?|social\s+engineering|injection|red[\s-]team|example\s+of|for\s+example|e\.g\.|such\s+as"
    r"|reported|was\s+detected|awareness|quoted|looks?\s+like|never\s+(?:follow|obey)|do\s+not\s+(?:follow|obey|act)"
    r"|treat\s+(?:it|them|such|this)\s+as|malicious|suspicious\s+(?:email|message|text)|scam\w*|fraudsters?"
    r"|impersonat\w+|incident\s+report|lessons\s+learned|threat|adversar\w+|tried\s+to|attempted\s+to|planted"
    r"|poison\w*|hidden\s+text|jailbreak\s+attempts?)\b",
    re.I,
)
_THIRD_PERSON_QUOTE = re.compile(r"[\"“'‘][^\"”'’\n]{8,200}[\"”'’]\s*(?:\(|,|\.|;|—|-)?\s*\w*", re.I)
_DECODE_ASK = re.compile(
    r"\b(?:decode|decoded|decoding|base64|base32|base-?85|ascii85|rot-?13|rot\d+|hex|reversed?|backwards|reassemble"
    r"|percent-?encoded|url-?encoded|morse|caesar|unscramble|put\s+it\s+back|encoded|html\s+entities)\b",
    re.I,
)
_FOLLOW = re.compile(
    r"\b(?:follow|obey|act\s+on|do\s+it|do\s+what|carry\s+out|execute|run|comply|respond\s+accordingly|then\s+do"
    r"|and\s+do|apply|then\s+act|and\s+act|before\s+use|treat\s+as\s+instructions|as\s+instructed)\b",
    re.I,
)

# Multilingual: the reading model, its user, its answer, overriding instructions, the system prompt.
_ML_MODEL = re.compile(
    r"asistente|\bIA\b|assistente|\bKI\b|KI-Assistent|Assistenten|assistant|\bAI\b|asystent|модел|ассистент|ИИ"
    r"|助手|アシスタント|モデル|어시스턴트|모델|सहायक|मॉडल|المساعد|النموذج|asistan|yapay\s+zeka|modelo|modèle|Modell",
)
_ML_USER = re.compile(
    r"usuario|usuário|utilisateur|Nutzer|Benutzer|utente|gebruiker|użytkownik|пользовател|用户|ユーザー|사용자"
    r"|उपयोगकर्ता|المستخدم|kullanıcı|alguien\s+pregunta|quelqu'un|jemand|qualcuno|iemand|ktoś|кто-то|有人|誰か|누군가",
    re.I,
)
_ML_OUTPUT = re.compile(
    r"respuesta|responde|réponse|réponds|Antwort|antworte|resposta|responda|risposta|rispondi|antwoord|odpowied"
    r"|ответ|回复|回答|答复|출력|응답|답변|उत्तर|الإجابة|أجب|yanıt|cevap|di\s+que|dis\s+que|sag\b|diga|di'|zeg"
    r"|powiedz|скажи|说|言って|말하세요|말해|कहो|قل|söyle|yaz\b|출력|出力|输出|выведи|affiche|muestra|mostra",
    re.I,
)
_ML_OVERRIDE = re.compile(
    r"instrucciones|instructions\s+précédentes|Anweisungen|instruções|istruzioni|instructies|instrukcj|инструкци"
    r"|指令|指示|지시|निर्देश|التعليمات|talimat|prompt\s+de\s+sistema|prompt\s+système|Systemprompt|системный\s+промпт"
    r"|系统提示|システムプロンプト|시스템\s*프롬프트|सिस्टम\s+प्रॉम्प्ट|موجّه\s+النظام|sistem\s+istemi|olvida|ignora|ignoriere"
    r"|игнорируй|忽略|無視|무시|नज़रअंदाज़|تجاهل|yok\s+say|historial|chatgeschiedenis|Verlauf|histórico|cronologia"
    r"|историю|对话记录|会話履歴|대화\s*기록|बातचीत|سجل\s+المحادثة|sohbet\s+geçmişi|fai\s+finta|finge|tu\s+es\s+maintenant"
    r"|a\s+partir\s+de\s+agora|a\s+partir\s+de\s+ahora|ab\s+jetzt|d'ora\s+in\s+poi|vanaf\s+nu|od\s+teraz|с\s+этого\s+момента"
    r"|从现在开始|今から|지금부터|अब\s+से|من\s+الآن|bundan\s+sonra|sin\s+(?:ningún\s+)?límite|keine\s+Grenzen|없다고"
    r"|no\s+hay\s+l[ií]mite|nessun\s+limite|non\s+ci\s+sono\s+limiti|aucune\s+limite|kein\s+Limit|sem\s+limite|ограничений\s+нет"
    r"|нет\s+ограничений|没有限制|制限はありません|한도가\s+없다",
    re.I,
)
_ML_PROMPT = re.compile(
    r"prompt\s+de\s+sistema|prompt\s+système|Systemprompt|prompt\s+di\s+sistema|systeemprompt|prompt\s+systemow"
    r"|системн\w+\s+промпт|系统提示|システムプロンプト|시스템\s*프롬프트|सिस्टम\s+प्रॉम्प्ट|موجّه\s+النظام|sistem\s+istemi"
    r"|historial\s+(?:completo\s+)?de\s+la\s+conversaci|chatgeschiedenis|Chatverlauf|histórico\s+da\s+conversa"
    r"|cronologia\s+della\s+chat|historię\s+rozmowy|историю\s+(?:переписки|чата|диалога)|对话记录|会話履歴|대화\s*기록"
    r"|mensagens\s+anteriores|messages\s+précédents|vorherigen\s+Nachrichten|messaggi\s+precedenti",
    re.I,
)
_FOREIGN = re.compile(
    r"\b(?:el|los|las|que|por|di|il|che|gli|der|die|das|und|nicht|het|een|niet|nie|się|dla|les|des|est|pas|um|uma"
    r"|não|para|com|ve|bir|bu|ile|ne|si|se|lo|della|tutte|alle|todas|todos)\b",
    re.I,
)
_NON_LATIN_LETTERS = re.compile(r"[^\W\d_a-zA-Z\u00c0-\u024f]")

# --- hidden carriers, read from the raw text ---------------------------------------------------------------
_INVISIBLE_RAW = re.compile("[\u00ad\u034f\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff]")
_TAG_RAW = re.compile("[\U000e0000-\U000e007f]")
_FULLWIDTH = re.compile("[\uff01-\uff5e]")
_HIDDEN_SEGMENTS = re.compile(
    r"<!--(.{0,2000}?)-->|\[//\]:\s*#\s*\((.{0,500}?)\)|!\[([^\]]{0,300})\]\(|\]\(\S{1,300}\s+\"([^\"]{0,300})\"\)"
    r"|<meta\b[^>]{0,300}content\s*=\s*\"([^\"]{0,500})\"|\(([^()]{0,500})\)\s*Tj|\[hidden text \([^)]{0,40}\):"
    r" ([^\]]{0,1000})\]|<[a-z][\w-]{0,20}\b[^<>]{0,300}?(?:\shidden\b|aria-hidden\s*=\s*[\"']?true|style\s*=\s*"
    r"[\"'][^\"'<>]{0,200}?(?:display\s*:\s*none|visibility\s*:\s*hidden|(?:font-size|opacity)\s*:\s*0\b|color\s*:"
    r"\s*#fff|left\s*:\s*-\d{3,}))[^<>]{0,200}>([^<]{0,1000})<",
    re.I | re.S,
)
_PDF_INVISIBLE = re.compile(r"\b3\s+Tr\b")
_WORD = re.compile(r"[^\W\d_]+")

# --- clauses -----------------------------------------------------------------------------------------------
_CLAUSE_BREAK = re.compile(
    r"(?<=[.!?。！？])\s+|\n+|;\s*|\s[—–]\s|\s-{1,2}\s|\s*\|\s*|\s*•\s*|\s//\s|\s::\s|\t+|\s=>\s|\s→\s|(?<=[:：])\s+(?=[A-Z])"
)


def clauses(text: str) -> list[str]:
    return [c.strip() for c in _CLAUSE_BREAK.split(text) if c and c.strip()]


# --- decoding encoded payloads -----------------------------------------------------------------------------
_HEX = re.compile(r"\b(?:[0-9a-f]{2}){12,}\b", re.I)
_PERCENT = re.compile(r"(?:%[0-9a-f]{2}[^\s%]{0,3}){6,}", re.I)
_BASE32 = re.compile(r"\b[A-Z2-7]{16,}={0,6}(?![\w=])")
_BASE64ISH = re.compile(r"[A-Za-z0-9+/_-]{16,}={0,2}")
_ENTITIES = re.compile(r"(?:&#x?[0-9a-f]{2,4};){4,}", re.I)
_UNICODE_ESCAPES = re.compile(r"(?:\\u[0-9a-f]{4}){4,}", re.I)


def _readable(text: str) -> bool:
    letters = sum(ch.isalpha() for ch in text)
    return len(text) >= 8 and " " in text and text.isprintable() and letters >= 0.6 * len(text.replace(" ", ""))


_BIDI_SPAN = re.compile("[\u202e\u2067]([^\u202c\u2069]{4,500})")


def decoded_payloads(text: str, raw: str = "") -> list[str]:
    """Readable text hidden in the common encodings (base64 also twice, base64url, base32, hex, percent,
    HTML entities, \\u escapes, rot13, reversed text) when the text asks for decoding."""
    found: list[str] = []

    def keep(candidate: str) -> None:
        if _readable(candidate) and candidate not in found:
            found.append(candidate)

    joined = re.sub(r"([A-Za-z0-9+/=]{8,})\n(?=[A-Za-z0-9+/=]{8,})", r"\1", text)  # base64 wrapped over lines
    for match in _BASE64ISH.finditer(joined):
        blob = match.group().replace("-", "+").replace("_", "/").rstrip("=")
        for _ in range(2):  # double encoding
            try:
                blob = base64.b64decode(blob + "=" * (-len(blob) % 4), validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError, ValueError):
                break
            keep(blob)
            blob = blob.strip().rstrip("=")
    for match in _BASE32.finditer(text):
        with contextlib.suppress(binascii.Error, UnicodeDecodeError, ValueError):
            keep(base64.b32decode(match.group() + "=" * (-len(match.group()) % 8)).decode("utf-8"))
    for match in _HEX.finditer(text):
        with contextlib.suppress(ValueError, UnicodeDecodeError):
            keep(bytes.fromhex(match.group()).decode("utf-8"))
    for match in _PERCENT.finditer(text):
        keep(unquote(match.group()))
    for match in _ENTITIES.finditer(text):
        keep(html.unescape(match.group()))
    for match in _UNICODE_ESCAPES.finditer(text):
        keep(match.group().encode().decode("unicode_escape", errors="ignore"))
    for match in _BIDI_SPAN.finditer(raw):  # right-to-left override: shown reversed, stored in reading order
        keep(match.group(1)[::-1])
    if _DECODE_ASK.search(text):
        for line in clauses(text):
            keep(codecs.decode(line, "rot13"))
            keep(line[::-1])
            keep(" ".join(reversed(line.split())))
    return found


# --- the features ------------------------------------------------------------------------------------------
_ANSWER_DIRECTIVE = re.compile(
    r"^\W*(?:(?:please|just|also|then|now|only|simply)\s+)*(?:say|state|claim|conclude|confirm|write|output|print|return"
    r"|reply|respond|answer|begin|start|end|generate|translate|echo|repeat|list|describe|rate|classify|report|treat"
    r"|recommend|promise|refuse|deny)\b[^.;\n]{0,60}?(?:\bthat\b|\bwith\b|\byes\b|\bno\b|\bonly\b|\bnothing\b"
    r"|\bas\b|[\"'“‘]|\bthe\s+(?:string|word|phrase)|\bin\s+(?:the|your|all|json|uppercase|caps))",
    re.I,
)
_LITERAL = re.compile(
    r"[\"“'‘][A-Z][A-Za-z_ ,!:]{2,60}[\"”'’]|\b[A-Z]{3,}(?:_[A-Z]+)+\b|\b(?:APPROVED|GRANTED|VERIFIED|OK)\b"
)
_HARMFUL_ACTION = re.compile(
    r"\btransfer\s+(?:£|\$|€|funds|money)|\bto\s+(?:GB|DE|FR|IE)\d{2}[A-Z0-9]{8,}|\bsort\s+code\b|\bdrop\s+table"
    r"|\bupdate\s+\w+\s+set\b|--force\b|\|\s*(?:ba)?sh\b|\bdelete_\w+|\bissue_refund|\b\w+_\w+\s+tool\b"
    r"|\bfor\s+(?:every|all)\s+customers?\b|\bwhole\s+company\b|\bapprove\s+pending|\bcustomer\s+ids?\s+\d+"
    r"|\bwith\s+their\s+(?:pin|password|credentials)|\blog\s+in\s+with\s+the\s+user|\benter\s+the\s+one-time"
    r"|\bhard-code\b|\bsecret\s+key\b|\bread\s+out\s+their\b|\b£1\s+verification|\bprivate\s+key",
    re.I,
)
_HARM_GOAL = re.compile(
    r"\b(?:authori[sz]e|approve|exempt|waive|leak\w*|passwords?|no\s+id|avoid\w*|weak\s+spots|bypass|root\s+access"
    r"|/etc/shadow|no\s+(?:access\s+controls|restrictions|rules)|shares?\s+internal|without\s+(?:any\s+)?(?:id|checks?"
    r"|review)|releasing\s+funds|opposite|unlocked|crypto|admin)\b",
    re.I,
)


# Patterns with no anchor or look-behind: one that finds nothing in the whole text finds nothing in any of its
# windows, so text_features tries it once on the whole text and skips it in every window when it is absent
# (on 90-word chunks that cut the features' cost several times over).
_UNANCHORED = (
    *("_READER", "_SAY_ANYWHERE", "_OUTPUT", "_USER", "_YOU_MODEL", "_CONDITION", "_STAFF", "_FALSE_CLAIM"),
    *("_EXFIL_VERB", "_EXFIL_OBJECT", "_DESTINATION", "_SECRET", "_OPEN_LINK", "_OVERRIDE", "_ROLEPLAY"),
    *("_TRAINING", "_SELF_DOC", "_ML_MODEL", "_ML_USER", "_ML_OUTPUT", "_ML_OVERRIDE", "_ML_PROMPT", "_LITERAL"),
    *("_HARMFUL_ACTION", "_HARM_GOAL"),
)


@functools.lru_cache(maxsize=4096)  # a pair window reads both of its clauses again
def _imperative(clause: str) -> bool:
    return _IMPERATIVE.search(clause) is not None


@functools.lru_cache(maxsize=4096)
def _directive(clause: str) -> bool:
    return _ANSWER_DIRECTIVE.search(clause) is not None


# The flags that are one unanchored pattern found in the window, in a table: text_features leaves out those
# absent from the whole text, and a loop over the rest costs less than a call per flag.
_PATTERN_FLAGS = (
    *(("says", _SAY_ANYWHERE), ("output", _OUTPUT), ("user", _USER), ("you_model", _YOU_MODEL)),
    *(("condition", _CONDITION), ("staff", _STAFF), ("false_claim", _FALSE_CLAIM), ("exfil_verb", _EXFIL_VERB)),
    *(("exfil_object", _EXFIL_OBJECT), ("destination", _DESTINATION), ("secret", _SECRET)),
    *(("open_link", _OPEN_LINK), ("override", _OVERRIDE), ("roleplay", _ROLEPLAY), ("training", _TRAINING)),
    *(("self_doc", _SELF_DOC), ("ml_model", _ML_MODEL), ("ml_user", _ML_USER), ("ml_output", _ML_OUTPUT)),
    *(("ml_override", _ML_OVERRIDE), ("ml_prompt", _ML_PROMPT), ("literal", _LITERAL)),
    *(("harmful", _HARMFUL_ACTION), ("harm_goal", _HARM_GOAL)),
)


@functools.lru_cache(maxsize=64)
def _present(absent: frozenset[re.Pattern[str]]) -> tuple[tuple[tuple[str, re.Pattern[str]], ...], tuple[str, ...]]:
    """The pattern flags to look for, and the names of those known to be false."""
    return (
        tuple((name, p) for name, p in _PATTERN_FLAGS if p not in absent),
        tuple(name for name, p in _PATTERN_FLAGS if p in absent),
    )


# A chunk's section path is the first clause of every chunk of its section, and headings, table cells and
# boilerplate recur: on corpus/ 20,291 clauses are 9,323 distinct texts, 13,434 distinct with the whole text's
# absent patterns. The answers depend on nothing else, so each is worked out once (read-only: shared by callers).
# Repeats come close together (a document's sections): 2,048 entries (~2 MB) catch 6,429 of the 6,961 repeats
# that 16,384 (~16 MB) would.
@functools.lru_cache(maxsize=2048)
def _flags(window: str, absent: frozenset[re.Pattern[str]] = frozenset()) -> Mapping[str, bool]:
    """The yes/no answers one window's features are made of."""
    parts = clauses(window)
    present, missing = _present(absent)
    flags = dict.fromkeys(missing, False)
    for name, pattern in present:
        flags[name] = pattern.search(window) is not None
    flags["addressed"] = _VOCATIVE.search(window) is not None or (
        _READER not in absent and _READER.search(window) is not None
    )
    flags["imperative"] = any(_imperative(c) for c in parts) or _IMPERATIVE.search(window) is not None
    flags["tool"] = _TOOL.search(window) is not None
    flags["foreign"] = not window.isascii() or _FOREIGN.search(window) is not None
    flags["directive"] = any(_directive(c) for c in parts)
    return MappingProxyType(flags)


def _window_features(window: str, absent: frozenset[re.Pattern[str]] = frozenset()) -> dict[str, bool]:
    return _features_of(_flags(window, absent))


def _features_of(flags: Mapping[str, bool]) -> dict[str, bool]:
    """The window features, conjunctions included, from a window's flags."""
    addressed, imperative, says, output = flags["addressed"], flags["imperative"], flags["says"], flags["output"]
    user, you_model, condition, staff = flags["user"], flags["you_model"], flags["condition"], flags["staff"]
    false_claim, secret, tool, open_link = flags["false_claim"], flags["secret"], flags["tool"], flags["open_link"]
    exfil, destination = flags["exfil_verb"] and flags["exfil_object"], flags["destination"]
    override, roleplay, training, self_doc = flags["override"], flags["roleplay"], flags["training"], flags["self_doc"]
    ml_model, ml_user, ml_output = flags["ml_model"], flags["ml_user"], flags["ml_output"]
    ml_override, foreign = flags["ml_override"], flags["foreign"]
    directive, literal = flags["directive"], flags["literal"]
    harmful, harm_goal = flags["harmful"], flags["harm_goal"]
    return {
        "answer_directive": directive,
        "answer_directive_and_claim": directive and (false_claim or literal),
        "answer_directive_no_staff": directive and not staff,
        "literal_verdict": literal,
        "harmful_action": harmful,
        "harmful_and_imperative": harmful and imperative,
        "roleplay_and_harm": roleplay and (harm_goal or false_claim) and not training,
        "addressed_to_model": addressed,
        "addressed_and_imperative": addressed and (imperative or says),
        "addressed_and_false_claim": addressed and false_claim,
        "imperative": imperative,
        "imperative_and_output": imperative and output,
        "imperative_and_user": imperative and user,
        "imperative_and_false_claim": imperative and false_claim,
        "imperative_and_self_document": imperative and self_doc,
        "says_and_user": says and user,
        "output_reference": output,
        "user_reference": user,
        "you_the_model": you_model,
        "conditional_trigger": condition,
        "conditional_and_says": condition and says and not staff,
        "conditional_and_user": condition and user,
        "conditional_and_false_claim": condition and false_claim,
        "staff_addressee": staff,
        "false_claim": false_claim,
        "exfiltration": exfil,
        "exfiltration_to_destination": (exfil or secret) and destination,
        "secret_data": secret,
        "tool_or_command": tool,
        "tool_and_imperative": tool and imperative,
        "open_link": open_link,
        "override": override,
        "override_and_model": override and (you_model or addressed),
        "roleplay": roleplay,
        "roleplay_not_training": roleplay and not training,
        "training": training,
        "self_document": self_doc,
        "multilingual_model": ml_model and foreign,
        "multilingual_user_or_output": (ml_user or ml_output) and foreign,
        "multilingual_override": ml_override and foreign,
        "multilingual_model_and_output": (ml_model or ml_user) and ml_output and foreign,
        "multilingual_prompt": flags["ml_prompt"],
    }


_UNANCHORED_PATTERNS = tuple(globals()[name] for name in _UNANCHORED)
# These four count only beside `foreign`, which no clause of a text has when the whole text has none (clauses
# are cut at spaces and punctuation, so _FOREIGN's \b reads alike in both): on such a text, about half the
# corpus's chunks, they are not looked for at all (the slowest of the whole-text searches, ~0.5 ms a chunk).
_WITH_FOREIGN_ONLY = frozenset((_ML_MODEL, _ML_USER, _ML_OUTPUT, _ML_OVERRIDE))

PASSAGE_FEATURES = (
    "fake_template",
    "link_with_data",
    "invisible_characters",
    "tag_characters",
    "fullwidth_letters",
    "mixed_scripts",
    "hidden_segment",
    "hidden_segment_commands",
    "pdf_invisible_text",
    "decode_and_follow",
    "decoded_payload_commands",
    "doc_control",
    "api_doc",
    "security_talk",
    "quoted_text",
    "non_latin",
    "long_text",
)


def _segment_commands(segment: str) -> bool:
    return any(
        (
            f["addressed_and_imperative"]
            or f["imperative"]
            or f["override"]
            or f["exfiltration"]
            or f["conditional_trigger"]
            or f["answer_directive"]
            or f["false_claim"]
            or f["user_reference"]
        )
        for f in (_window_features(c) for c in clauses(segment)[:6])
    ) or bool(_MODEL_WORD.search(segment))


def text_features(normalised: str, raw: str | None = None) -> dict[str, float]:
    """The feature values of one text: each window feature's highest value over the clause windows, and the
    whole-text ones."""
    raw = normalised if raw is None else raw
    parts = clauses(normalised)[:200]
    foreign_free = normalised.isascii() and _FOREIGN.search(normalised) is None
    absent = frozenset(
        p for p in _UNANCHORED_PATTERNS if (foreign_free and p in _WITH_FOREIGN_ONLY) or p.search(normalised) is None
    )
    # A pair window's flags are those of its two clauses or'ed together: each clause is read once, and the
    # pair's conjunctions still join an addressee in one clause to a command in the next.
    single = [_flags(part, absent) for part in parts] or [_flags("", absent)]
    pairs = [{k: a[k] or b[k] for k in a} for a, b in itertools.pairwise(single)]
    values: dict[str, float] = {}
    for flags in single + pairs:
        for name, on in _features_of(flags).items():
            if on:
                values[name] = 1.0
            else:
                values.setdefault(name, 0.0)
    segments = [next(g for g in m.groups() if g is not None) for m in _HIDDEN_SEGMENTS.finditer(raw) if any(m.groups())]
    payloads = decoded_payloads(normalised, raw) if len(normalised) < 20_000 else []
    words = _WORD.findall(raw)
    mixed = sum(1 for w in words if len(w) > 2 and _NON_LATIN_LETTERS.search(w) and re.search(r"[a-zA-Z]", w))
    values.update(
        {
            "fake_template": 1.0 if _FAKE_TEMPLATE.search(normalised) else 0.0,
            "link_with_data": 1.0 if _LINK_WITH_DATA.search(normalised) else 0.0,
            "invisible_characters": 1.0 if _INVISIBLE_RAW.search(raw) else 0.0,
            "tag_characters": 1.0 if _TAG_RAW.search(raw) else 0.0,
            "fullwidth_letters": 1.0 if _FULLWIDTH.search(raw) else 0.0,
            "mixed_scripts": 1.0 if mixed else 0.0,
            "hidden_segment": 1.0 if segments else 0.0,
            "hidden_segment_commands": 1.0 if any(_segment_commands(s) for s in segments) else 0.0,
            "pdf_invisible_text": 1.0 if _PDF_INVISIBLE.search(raw) else 0.0,
            "decode_and_follow": 1.0 if _DECODE_ASK.search(normalised) and _FOLLOW.search(normalised) else 0.0,
            "decoded_payload_commands": 1.0 if any(_segment_commands(p) for p in payloads) else 0.0,
            "doc_control": 1.0 if _DOC_CONTROL.search(normalised) else 0.0,
            "api_doc": 1.0 if _API_DOC.search(normalised) else 0.0,
            "security_talk": 1.0 if _SECURITY_TALK.search(normalised) else 0.0,
            "quoted_text": 1.0 if _THIRD_PERSON_QUOTE.search(normalised) else 0.0,
            "non_latin": 1.0 if not normalised.isascii() and _NON_LATIN_LETTERS.search(normalised) else 0.0,
            "long_text": 1.0 if len(words) > 60 else 0.0,
        }
    )
    return values


FEATURES: tuple[str, ...] = (*_window_features("").keys(), *PASSAGE_FEATURES)


def strongest_clause(normalised: str, weights: dict[str, float]) -> str:
    """The clause whose features weigh most (with the clause before it as context): the excerpt a finding
    quotes. A clause of the text itself, so that it can be found in it."""
    parts = clauses(normalised)[:200]
    if not parts:
        return normalised

    def weight(i: int) -> float:
        window = parts[i] if i == 0 else f"{parts[i - 1]}\n{parts[i]}"
        alone = sum(weights.get(n, 0.0) for n, on in _window_features(parts[i]).items() if on)
        paired = sum(weights.get(n, 0.0) for n, on in _window_features(window).items() if on)
        return max(alone, paired)

    return parts[max(range(len(parts)), key=lambda i: (weight(i), -i))]


__all__ = ["FEATURES", "clauses", "decoded_payloads", "strongest_clause", "text_features"]
