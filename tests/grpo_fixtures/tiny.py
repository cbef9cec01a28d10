"""A tiny, randomly initialised Llama with a word-level tokenizer, saved as a normal HF folder.

Why not SmolLM2-135M for the learning and resume tests: on this 2-core CPU one forward+backward of
SmolLM2 over 8 sequences of ~220 tokens took 38-51 s and sampling 8 × 24 tokens took longer, so a
learning run of several steps would take tens of minutes. This model goes through exactly the same
code (HF folder → local_model.load → LocalGenerator → TokenBackend → rollout episode → Grader →
GRPO update in the DeepSpeed engine → HF checkpoint) in seconds per step.

Its vocabulary holds a few words and, as single tokens, the two complete tool calls of the buttons
domain; every other word of the prompt (policy, tool preamble) is [UNK]. At initialisation the
next-token distribution is close to uniform, so an episode succeeds only when the right call token
happens to be sampled (~1 in 8): success is possible but rare, and must be learned from the prompt
(`press red` vs `press blue`).
"""

from __future__ import annotations

from pathlib import Path

CALL = '<tool_call>{{"name":"press","arguments":{{"button":"{}"}}}}</tool_call>'
WORDS = ["system", "user", "assistant", "press", "red", "blue", "ok", "hello", "sure", "done",
         CALL.format("red"), CALL.format("blue")]
SPECIAL = ["<pad>", "[UNK]", "<|im_start|>", "<|im_end|>"]
TEMPLATE = ("{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}"
            "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def make_tiny_model(target: Path, seed: int = 0) -> Path:
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(SPECIAL + WORDS)}
    core = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="[UNK]", pad_token="<pad>",
                                        bos_token="<|im_start|>", eos_token="<|im_end|>")
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tokenizer.chat_template = TEMPLATE
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                         max_position_embeddings=512, tie_word_embeddings=True,
                         bos_token_id=vocab["<|im_start|>"], eos_token_id=vocab["<|im_end|>"],
                         pad_token_id=vocab["<pad>"])
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    target.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    return target
