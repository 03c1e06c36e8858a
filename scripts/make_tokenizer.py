"""Write the tiny tokenizer every fixture ships (tests/data/tokenizer/), with transformers' own save_pretrained.

A real release ships its tokenizer and chat template beside the weights; save_pretrained of a model writes
neither, so the fixtures got none and doctor could not call a tokenizer-less folder an error (issue 29).
This builds one WordLevel tokenizer (the `tokenizers` library) with a chat template, wraps it in
PreTrainedTokenizerFast and saves it the way transformers 5.17 saves any fast tokenizer. The files are then
copied into each fixture folder (scripts/add_tokenizer.sh); their vocabulary (48 entries) is below every
fixture's vocab_size (256 and up).

Run on the GPU host (transformers 5.17):  python3 scripts/make_tokenizer.py OUT_DIR
"""
import json
import os
import sys

import tokenizers
import transformers
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }}{{ eos_token }}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def main() -> None:
    out = sys.argv[1]
    special = ["<unk>", "<s>", "</s>", "<pad>", "<|system|>", "<|user|>", "<|assistant|>"]
    words = ["the", "a", "of", "to", "and", "in", "is", "it", "you", "that", "he", "was", "for", "on", "are",
             "with", "as", "I", "his", "they", "be", "at", "one", "have", "this", "from", "or", "had", "by",
             "hot", "word", "but", "what", "some", "we", "can", "out", "other", "were", "all", "there"]
    vocab = {t: i for i, t in enumerate(special + words)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                   pad_token="<pad>", additional_special_tokens=special[4:])
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    # Round trip: the saved folder loads, and the template renders.
    back = transformers.AutoTokenizer.from_pretrained(out)
    text = back.apply_chat_template([{"role": "user", "content": "what is it"}], tokenize=False,
                                    add_generation_prompt=True)
    ids = back(text)["input_ids"]
    info = {"transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
            "files": sorted(os.listdir(out)), "vocab": len(vocab), "rendered": text, "ids": ids}
    with open(os.path.join(out, "..", "tokenizer-made.json"), "w") as f:
        json.dump(info, f, indent=2)
    print(json.dumps(info, indent=2))


if __name__ == "__main__":
    main()
