"""Byte-level byte-pair encoding (BPE), GPT-2's tokenizer, written from its definition.

The tokenization chapter (``book/tokenization.md``) derives it. Text is turned into token ids
in three steps:

1. **Pre-tokenization** (:func:`pretokenize`) cuts the text into chunks with GPT-2's regular
   expression: contractions, runs of letters, of digits, of other symbols (each optionally led
   by one space) and runs of whitespace. Merges never cross a chunk boundary, so no token
   holds the end of one word and the start of the next. SmolLM2's tokenizer first cuts every
   digit off on its own (the pattern ``"smollm"``, :func:`pretokenizer`).
2. Each chunk becomes its **UTF-8 bytes**, one token each: ids 0 to 255 cover every possible
   text, whatever its script, with no unknown token.
3. The **merges**, learned by :meth:`BPE.train`, are applied in the order they were learned:
   merge ``r`` replaces every adjacent pair ``(a, b)`` by one new token whose bytes are those of
   ``a`` followed by those of ``b``.

:class:`BPE` trains (fast, incrementally; :func:`train_naive` is the textbook loop it must
agree with), encodes, decodes, saves and loads a tokenizer, and reads GPT-2's own files
(:meth:`BPE.from_gpt2`), after which it gives GPT-2's token ids exactly. It also reads any
vocabulary written as GPT-2's are, token strings and ``"a b"`` merges
(:meth:`BPE.from_vocabulary`), such as the one in a GGUF file's metadata
(:meth:`BPE.from_gguf_metadata`): SmolLM2's, whose ids it then gives exactly. That vocabulary
has no token for 21 of the 256 bytes, which encoding drops, as SmolLM2's own tokenizer does.
:func:`bytes_to_unicode` is GPT-2's table that spells every byte as a printable character, the
alphabet of those files. NumPy and the standard library only.

Four modules, one job each: :mod:`~scratchformer.tokenizer.pretokenization` (step 1: GPT-2's
and SmolLM2's patterns, :func:`pretokenizer`, :func:`pretokenize`, the special tokens'
splitting, :data:`ENDOFTEXT` and :func:`bytes_to_unicode`), :mod:`~scratchformer.tokenizer.bpe`
(steps 2 and 3: :class:`BPE`, its encoding, decoding and file, and :func:`train_naive`),
:mod:`~scratchformer.tokenizer.training` (both trainers' algorithms, which :meth:`BPE.train`
and :func:`train_naive` call) and :mod:`~scratchformer.tokenizer.vocabularies` (reading other
tokenizers' vocabularies, which :meth:`BPE.from_gpt2`, :meth:`BPE.from_vocabulary` and
:meth:`BPE.from_gguf_metadata` call). The public names are here.
"""

from __future__ import annotations

from .bpe import BPE, train_naive
from .pretokenization import (
    ENDOFTEXT,
    GPT2_PATTERN,
    SMOLLM_PATTERNS,
    bytes_to_unicode,
    pretokenize,
    pretokenizer,
)

__all__ = ["GPT2_PATTERN", "SMOLLM_PATTERNS", "ENDOFTEXT", "bytes_to_unicode", "pretokenizer",
           "pretokenize", "BPE", "train_naive"]
