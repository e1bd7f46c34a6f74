#!/usr/bin/env python3
"""Golden logits for a synthetic llama / qwen3 / qwen3moe / gemma3 / gpt-oss GGUF from
transformers (LlamaForCausalLM, Qwen3ForCausalLM, Qwen3MoeForCausalLM, Gemma3ForCausalLM,
GptOssForCausalLM).

The GGUF is read and dequantized with the `gguf` package (its own numpy codecs, not
zinc's), llama.cpp's converter changes are undone (the `llama` q/k projection rows are
permuted so that adjacent-pair RoPE reproduces rotate_half; rope_freqs.weight divides
each RoPE frequency; Gemma's norm weights were stored + 1; GPT-OSS's experts' gate and up were split out of
one interleaved gate_up projection), the weights are loaded into
the Hugging Face model, and one full forward pass over a fixed token sequence gives
the logits at every position.

Writes OUT.txt (metadata: synth arguments, file hash, tokens, shape) and OUT.bin
(float32 logits, [n_tokens, n_vocab] row-major), the format tests/model/oracle_test.cpp
reads. Needs torch, transformers (>= 5), numpy, gguf. `--dry-run` stops before torch:
it reads, dequantizes and maps every tensor and checks the q/k un-permutation.

  python3 tools/oracle_dense.py MODEL.gguf OUT_PREFIX --tokens 100 --seed 1 --synth "ARGS"
"""
import argparse
import sys

import numpy as np
import gguf
from gguf.quants import dequantize


def fnv1a64(path):
    h = 0xCBF29CE484222325
    for b in np.fromfile(path, dtype=np.uint8).tobytes():  # files here are a few MB
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def field(reader, key, default=None):
    f = reader.get_field(key)
    if f is None:
        if default is None:
            sys.exit(f"missing metadata key {key}")
        return default
    return f.contents()


def load_tensors(reader):
    out = {}
    for t in reader.tensors:
        dims = [int(x) for x in t.shape]  # GGML order, innermost first
        arr = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32)
        out[t.name] = arr.reshape(list(reversed(dims)))
    return out


def converter_permute(w, n_head):
    """llama.cpp's convert_hf_to_gguf permutation of llama q/k rows, restated: within
    each head, HF row c*D/2 + i (c in {0, 1}) becomes GGUF row 2*i + c."""
    D = w.shape[0] // n_head
    out = np.empty_like(w)
    for h in range(n_head):
        for i in range(D // 2):
            for c in range(2):
                out[h * D + 2 * i + c] = w[h * D + c * (D // 2) + i]
    return out


def unpermute(w, n_head):
    """Back to Hugging Face's row order: GGUF rows per head are (D/2 pairs, 2)."""
    return w.reshape(n_head, -1, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def read_model(path):
    """The HF config arguments and state dict (numpy) for the GGUF at path."""
    r = gguf.GGUFReader(path)
    arch = str(field(r, "general.architecture"))
    if arch not in ("llama", "qwen3", "qwen3moe", "gemma3", "gpt-oss"):
        sys.exit(f"{path}: architecture {arch} is not one this oracle covers")
    a = arch + "."
    n_layer = int(field(r, a + "block_count"))
    d = int(field(r, a + "embedding_length"))
    Hq = int(field(r, a + "attention.head_count"))
    Hkv = int(field(r, a + "attention.head_count_kv", Hq))
    D = int(field(r, a + "attention.key_length", d // Hq))
    n_rot = int(field(r, a + "rope.dimension_count", D))
    theta = float(field(r, a + "rope.freq_base", 10000.0))
    eps = float(field(r, a + "attention.layer_norm_rms_epsilon"))
    ctx = int(field(r, a + "context_length"))
    if n_rot != D:
        sys.exit("partial rotary dims are not covered")
    scaling = str(field(r, a + "rope.scaling.type", "none"))
    if scaling != "none" and not (arch == "gemma3" and scaling == "linear") and not (arch == "gpt-oss" and scaling == "yarn"):
        sys.exit(f"rope scaling {scaling} is not covered for {arch}")
    W = load_tensors(r)
    V = W["token_embd.weight"].shape[0]
    tied = "output.weight" not in W

    cfg = dict(vocab_size=V, hidden_size=d, num_hidden_layers=n_layer, num_attention_heads=Hq,
               num_key_value_heads=Hkv, head_dim=D, rms_norm_eps=eps, max_position_embeddings=ctx,
               tie_word_embeddings=tied, attention_bias=False, hidden_act="silu", pad_token_id=None,
               rope_parameters={"rope_type": "default", "rope_theta": theta})
    if arch == "llama":
        cfg.update(intermediate_size=int(field(r, a + "feed_forward_length")), mlp_bias=False)
    elif arch == "gemma3":
        # llama.cpp's reading of the file (src/models/gemma3.cpp there): every
        # `pattern`-th layer global, the others local with RoPE base freq_base_swa and
        # no scaling; queries scaled by head_dim (n_embd / n_head for the 62-layer 27B).
        window = int(field(r, a + "attention.sliding_window", 0))
        pattern = int(field(r, a + "attention.sliding_window_pattern", 6))
        full = {"rope_type": "default", "rope_theta": theta}
        if scaling == "linear":
            full = {"rope_type": "linear", "factor": float(field(r, a + "rope.scaling.factor")), "rope_theta": theta}
        local = {"rope_type": "default", "rope_theta": float(field(r, a + "rope.freq_base_swa", 10000.0))}
        del cfg["attention_bias"], cfg["hidden_act"]
        cfg.update(intermediate_size=int(field(r, a + "feed_forward_length")),
                   hidden_activation="gelu_pytorch_tanh",
                   query_pre_attn_scalar=d // Hq if n_layer == 62 else D,
                   sliding_window=window if window > 0 else None,
                   layer_types=["sliding_attention" if window > 0 and (i + 1) % pattern else "full_attention"
                                for i in range(n_layer)],
                   final_logit_softcapping=None, attn_logit_softcapping=None, bos_token_id=None,
                   eos_token_id=None, rope_parameters={"sliding_attention": local, "full_attention": full})
    elif arch == "gpt-oss":
        # Layer i local (window) unless (i + 1) is a multiple of the pattern (2); YaRN
        # without rounding the correction range (truncate=false: gpt-oss-20b's config).
        window = int(field(r, a + "attention.sliding_window", 0))
        pattern = int(field(r, a + "attention.sliding_window_pattern", 2))
        rope = {"rope_type": "yarn", "rope_theta": theta, "factor": float(field(r, a + "rope.scaling.factor")),
                "original_max_position_embeddings": int(field(r, a + "rope.scaling.original_context_length")),
                "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False}
        del cfg["hidden_act"]
        cfg.update(intermediate_size=int(field(r, a + "expert_feed_forward_length")),
                   num_local_experts=int(field(r, a + "expert_count")),
                   num_experts_per_tok=int(field(r, a + "expert_used_count")), attention_bias=True,
                   sliding_window=window, swiglu_limit=7.0, rope_parameters=rope,
                   layer_types=["sliding_attention" if window > 0 and (i + 1) % pattern else "full_attention"
                                for i in range(n_layer)])
    elif arch == "qwen3":
        cfg.update(intermediate_size=int(field(r, a + "feed_forward_length")), use_sliding_window=False,
                   layer_types=["full_attention"] * n_layer)
    else:
        ff = int(field(r, a + "expert_feed_forward_length"))
        # llama.cpp always renormalises the chosen experts' weights for qwen3moe.
        cfg.update(intermediate_size=ff, moe_intermediate_size=ff, num_experts=int(field(r, a + "expert_count")),
                   num_experts_per_tok=int(field(r, a + "expert_used_count")), norm_topk_prob=True,
                   decoder_sparse_step=1, mlp_only_layers=[], use_sliding_window=False,
                   layer_types=["full_attention"] * n_layer)

    # Norm weights are stored as in HF (plain x_hat * w) for llama and Qwen3; Gemma's
    # RMSNorm multiplies by (1 + w), and the converter stored w + 1.
    shift = 1.0 if arch == "gemma3" else 0.0

    def norm(name):
        return W[name] - shift

    sd = {"model.embed_tokens.weight": W["token_embd.weight"],
          "model.norm.weight": norm("output_norm.weight"),
          "lm_head.weight": W["token_embd.weight"] if tied else W["output.weight"]}
    for i in range(n_layer):
        b, p = f"blk.{i}.", f"model.layers.{i}."
        s = p + "self_attn."
        q, k = W[b + "attn_q.weight"], W[b + "attn_k.weight"]
        if arch == "gpt-oss":
            for proj, t in (("q_proj", "attn_q"), ("k_proj", "attn_k"), ("v_proj", "attn_v"), ("o_proj", "attn_output")):
                sd[s + proj + ".bias"] = W[b + t + ".bias"]
            sd[s + "sinks"] = W[b + "attn_sinks.weight"]
        elif arch == "llama":
            q, k = unpermute(q, Hq), unpermute(k, Hkv)
            if not (np.array_equal(converter_permute(q, Hq), W[b + "attn_q.weight"]) and
                    np.array_equal(converter_permute(k, Hkv), W[b + "attn_k.weight"])):
                sys.exit("q/k un-permutation does not invert the converter's permutation")
        else:
            sd[s + "q_norm.weight"] = norm(b + "attn_q_norm.weight")
            sd[s + "k_norm.weight"] = norm(b + "attn_k_norm.weight")
        sd[s + "q_proj.weight"] = q
        sd[s + "k_proj.weight"] = k
        sd[s + "v_proj.weight"] = W[b + "attn_v.weight"]
        sd[s + "o_proj.weight"] = W[b + "attn_output.weight"]
        sd[p + "input_layernorm.weight"] = norm(b + "attn_norm.weight")
        if arch == "gemma3":
            sd[p + "post_attention_layernorm.weight"] = norm(b + "post_attention_norm.weight")
            sd[p + "pre_feedforward_layernorm.weight"] = norm(b + "ffn_norm.weight")
            sd[p + "post_feedforward_layernorm.weight"] = norm(b + "post_ffw_norm.weight")
        elif arch != "gpt-oss":
            sd[p + "post_attention_layernorm.weight"] = W[b + "ffn_norm.weight"]
        m = p + "mlp."
        if arch == "gpt-oss":
            sd[p + "post_attention_layernorm.weight"] = W[b + "post_attention_norm.weight"]
            sd[m + "router.weight"] = W[b + "ffn_gate_inp.weight"]
            sd[m + "router.bias"] = W[b + "ffn_gate_inp.bias"]
            # HF: gate_up_proj [E, d, 2ff] with gate in the even columns and up in the odd
            # ones (x @ W); the GGUF has gate and up [E, ff, d] apart, down [E, d, ff].
            gate, up = W[b + "ffn_gate_exps.weight"], W[b + "ffn_up_exps.weight"]
            E, ff, dd = gate.shape
            gate_up = np.empty((E, dd, 2 * ff), dtype=np.float32)
            gate_up[:, :, 0::2], gate_up[:, :, 1::2] = gate.transpose(0, 2, 1), up.transpose(0, 2, 1)
            gate_up_bias = np.empty((E, 2 * ff), dtype=np.float32)
            gate_up_bias[:, 0::2], gate_up_bias[:, 1::2] = W[b + "ffn_gate_exps.bias"], W[b + "ffn_up_exps.bias"]
            sd[m + "experts.gate_up_proj"] = gate_up
            sd[m + "experts.gate_up_proj_bias"] = gate_up_bias
            sd[m + "experts.down_proj"] = W[b + "ffn_down_exps.weight"].transpose(0, 2, 1)
            sd[m + "experts.down_proj_bias"] = W[b + "ffn_down_exps.bias"]
        elif arch == "qwen3moe":
            sd[m + "gate.weight"] = W[b + "ffn_gate_inp.weight"]
            # [E, ff, d] each; transformers 5 fuses them as gate_up_proj [E, 2ff, d].
            sd[m + "experts.gate_proj"] = W[b + "ffn_gate_exps.weight"]
            sd[m + "experts.up_proj"] = W[b + "ffn_up_exps.weight"]
            sd[m + "experts.down_proj"] = W[b + "ffn_down_exps.weight"]  # [E, d, ff]
        else:
            sd[m + "gate_proj.weight"] = W[b + "ffn_gate.weight"]
            sd[m + "up_proj.weight"] = W[b + "ffn_up.weight"]
            sd[m + "down_proj.weight"] = W[b + "ffn_down.weight"]
    rope_factors = W.get("rope_freqs.weight")
    return arch, cfg, sd, rope_factors, V


def fit_experts(sd, want):
    """Expert weights in whichever layout the installed transformers uses."""
    out = {}
    for key, value in sd.items():
        if key.endswith("experts.gate_proj") or key.endswith("experts.up_proj"):
            continue
        if key.endswith("experts.down_proj") and key[: -len("down_proj")] + "gate_proj" in sd:
            base = key[: -len("down_proj")]
            gate, up = sd[base + "gate_proj"], sd[base + "up_proj"]
            if base + "gate_up_proj" in want:  # fused 3D parameters
                out[base + "gate_up_proj"] = np.concatenate([gate, up], axis=1)
                out[key] = value
            else:  # one module per expert
                for e in range(value.shape[0]):
                    out[f"{base}{e}.gate_proj.weight"] = gate[e]
                    out[f"{base}{e}.up_proj.weight"] = up[e]
                    out[f"{base}{e}.down_proj.weight"] = value[e]
            continue
        out[key] = value
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--tokens", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--synth", default="", help="the zinc synth arguments that made MODEL (recorded)")
    ap.add_argument("--dry-run", action="store_true", help="map the weights and stop before torch")
    args = ap.parse_args()

    arch, cfg, sd_np, rope_factors, V = read_model(args.model)
    if args.dry_run:
        for k in sorted(sd_np):
            print(f"{k:56s} {tuple(sd_np[k].shape)}")
        print(f"{arch}: config {cfg}\nrope_freqs {None if rope_factors is None else rope_factors.tolist()}")
        return

    import torch
    import transformers

    cls_name, cfg_name = {"llama": ("LlamaForCausalLM", "LlamaConfig"),
                          "qwen3": ("Qwen3ForCausalLM", "Qwen3Config"),
                          "qwen3moe": ("Qwen3MoeForCausalLM", "Qwen3MoeConfig"),
                          "gemma3": ("Gemma3ForCausalLM", "Gemma3TextConfig"),
                          "gpt-oss": ("GptOssForCausalLM", "GptOssConfig")}[arch]
    config = getattr(transformers, cfg_name)(**cfg)
    config._attn_implementation = "eager"
    config._experts_implementation = "eager"  # the reference loop over experts
    torch.manual_seed(0)
    model = getattr(transformers, cls_name)(config).eval().float()

    want = model.state_dict()
    sd_np = fit_experts(sd_np, want)
    if cfg["tie_word_embeddings"] and "lm_head.weight" not in want:
        del sd_np["lm_head.weight"]
    sd = {k: torch.from_numpy(np.ascontiguousarray(v, dtype=np.float32)) for k, v in sd_np.items()}
    missing = sorted(set(want) - set(sd))
    extra = sorted(set(sd) - set(want))
    bad = [k for k in sd if k in want and tuple(want[k].shape) != tuple(sd[k].shape)]
    if missing or extra or bad:
        sys.exit(f"state dict mismatch: missing {missing} extra {extra} shape "
                 f"{[(k, tuple(want[k].shape), tuple(sd[k].shape)) for k in bad]}")
    model.load_state_dict(sd, strict=True)
    if cfg["tie_word_embeddings"] and not torch.equal(model.lm_head.weight, model.model.embed_tokens.weight):
        sys.exit("tied lm_head does not equal the embedding")

    if rope_factors is not None:
        # llama.cpp divides frequency j by rope_freqs[j] (Llama 3's long-context scaling,
        # which the converter bakes into this tensor); do the same to HF's default RoPE.
        factors = torch.from_numpy(np.ascontiguousarray(rope_factors, dtype=np.float32))
        patched = 0
        for mod in model.modules():
            inv = getattr(mod, "inv_freq", None)
            if isinstance(inv, torch.Tensor):
                if inv.shape != factors.shape:
                    sys.exit(f"rope_freqs {tuple(factors.shape)} vs inv_freq {tuple(inv.shape)}")
                inv.copy_(inv / factors)
                mod.original_inv_freq = inv.clone()
                patched += 1
        if patched == 0:
            sys.exit("no rotary embedding with inv_freq found to apply rope_freqs to")
        print(f"applied rope_freqs to {patched} rotary embedding(s)")

    rng = np.random.default_rng(args.seed)
    tokens = rng.integers(0, V, size=args.tokens).tolist()
    with torch.no_grad():
        ids = torch.tensor([tokens])
        full = model(input_ids=ids, use_cache=False).logits[0].float().numpy()
        # Cross-check the oracle itself: token-by-token decode with its cache.
        out = model(input_ids=ids[:, :1], use_cache=True)
        past, steps = out.past_key_values, [out.logits[0, -1]]
        for i in range(1, len(tokens)):
            out = model(input_ids=ids[:, i:i + 1], past_key_values=past, use_cache=True)
            past = out.past_key_values
            steps.append(out.logits[0, -1])
        step = torch.stack(steps).float().numpy()
    print(f"oracle self-check: prefill vs decode max abs diff {np.abs(full - step).max():.3g}; "
          f"logit std {full.std():.3g}")

    full.astype("<f4").tofile(args.out + ".bin")
    with open(args.out + ".txt", "w") as f:
        f.write(f"# golden logits from transformers {cls_name} (tools/oracle_dense.py)\n")
        f.write(f"synth {args.synth}\n")
        f.write(f"fnv1a64 {fnv1a64(args.model):016x}\n")
        f.write(f"n_vocab {V}\n")
        f.write(f"tokens {','.join(map(str, tokens))}\n")
    print(f"wrote {args.out}.txt/.bin: {len(tokens)} x {V}")


if __name__ == "__main__":
    main()
