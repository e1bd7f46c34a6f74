#!/usr/bin/env python3
"""Golden logits for a synthetic qwen35moe GGUF from transformers' Qwen3_5MoeForCausalLM.

The GGUF is read and dequantized with the `gguf` package (its own numpy codecs, not
zinc's), the converter's changes are undone (norm weights stored +1, ssm_a = -exp(A_log),
GDN value heads in tiled order), the weights are loaded into the Hugging Face model, and
one full forward pass over a fixed token sequence gives the logits at every position.

Writes OUT.txt (metadata: file hash, tokens, shape) and OUT.bin (float32 logits,
[n_tokens, n_vocab] row-major). Needs torch, transformers (>= 5), numpy, gguf.

  python3 tools/oracle_qwen35moe.py MODEL.gguf OUT_PREFIX --tokens 100 --seed 1 --synth "ARGS"
"""
import argparse
import sys

import numpy as np
import torch
import gguf
from gguf.quants import dequantize


def fnv1a64(path):
    h = 0xCBF29CE484222325
    data = np.fromfile(path, dtype=np.uint8)
    # Chunked FNV-1a in pure python is slow; files here are a few MB.
    for b in data.tobytes():
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--tokens", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--synth", default="", help="the zinc synth arguments that made MODEL (recorded)")
    args = ap.parse_args()

    from transformers import Qwen3_5MoeForCausalLM, Qwen3_5MoeTextConfig

    r = gguf.GGUFReader(args.model)
    a = "qwen35moe."
    n_layer = int(field(r, a + "block_count"))
    d = int(field(r, a + "embedding_length"))
    Hq = int(field(r, a + "attention.head_count"))
    Hkv = int(field(r, a + "attention.head_count_kv"))
    D = int(field(r, a + "attention.key_length"))
    n_rot = int(field(r, a + "rope.dimension_count"))
    sections = [int(x) for x in field(r, a + "rope.dimension_sections")][:3]
    theta = float(field(r, a + "rope.freq_base"))
    eps = float(field(r, a + "attention.layer_norm_rms_epsilon"))
    E = int(field(r, a + "expert_count"))
    k_used = int(field(r, a + "expert_used_count"))
    ff = int(field(r, a + "expert_feed_forward_length"))
    sff = int(field(r, a + "expert_shared_feed_forward_length"))
    K = int(field(r, a + "ssm.conv_kernel"))
    dk = int(field(r, a + "ssm.state_size"))
    Hk = int(field(r, a + "ssm.group_count"))
    H = int(field(r, a + "ssm.time_step_rank"))
    dv = int(field(r, a + "ssm.inner_size")) // H
    interval = int(field(r, a + "full_attention_interval", 4))
    W = load_tensors(r)
    V = W["token_embd.weight"].shape[0]

    layer_types = ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(n_layer)]
    cfg = Qwen3_5MoeTextConfig(
        vocab_size=V, hidden_size=d, num_hidden_layers=n_layer, num_attention_heads=Hq,
        num_key_value_heads=Hkv, head_dim=D, rms_norm_eps=eps, linear_conv_kernel_dim=K,
        linear_key_head_dim=dk, linear_value_head_dim=dv, linear_num_key_heads=Hk,
        linear_num_value_heads=H, moe_intermediate_size=ff, shared_expert_intermediate_size=sff,
        num_experts_per_tok=k_used, num_experts=E, tie_word_embeddings=False,
        max_position_embeddings=4096, layer_types=layer_types,
        rope_parameters={"rope_type": "default", "rope_theta": theta, "partial_rotary_factor": n_rot / D,
                         "mrope_section": sections, "mrope_interleaved": True},
    )
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    model = Qwen3_5MoeForCausalLM(cfg).eval().float()

    # GGUF value head p reads key head p % Hk; HF value head h reads key head h // r.
    r_ = H // Hk
    hf_from_gguf = np.array([(h % r_) * Hk + h // r_ for h in range(H)])

    def heads_rows(x, width):  # reorder blocks of `width` rows by value head
        return x.reshape(H, width, *x.shape[1:])[hf_from_gguf].reshape(x.shape)

    def t(x):
        return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))

    sd = {"model.embed_tokens.weight": t(W["token_embd.weight"]),
          "model.norm.weight": t(W["output_norm.weight"] - 1),
          "lm_head.weight": t(W["output.weight"])}
    for i in range(n_layer):
        b, p = f"blk.{i}.", f"model.layers.{i}."
        sd[p + "input_layernorm.weight"] = t(W[b + "attn_norm.weight"] - 1)
        sd[p + "post_attention_layernorm.weight"] = t(W[b + "post_attention_norm.weight"] - 1)
        if layer_types[i] == "full_attention":
            s = p + "self_attn."
            sd[s + "q_proj.weight"] = t(W[b + "attn_q.weight"])
            sd[s + "k_proj.weight"] = t(W[b + "attn_k.weight"])
            sd[s + "v_proj.weight"] = t(W[b + "attn_v.weight"])
            sd[s + "o_proj.weight"] = t(W[b + "attn_output.weight"])
            sd[s + "q_norm.weight"] = t(W[b + "attn_q_norm.weight"] - 1)
            sd[s + "k_norm.weight"] = t(W[b + "attn_k_norm.weight"] - 1)
        else:
            s = p + "linear_attn."
            qk = 2 * Hk * dk
            qkv = W[b + "attn_qkv.weight"]
            sd[s + "in_proj_qkv.weight"] = t(np.concatenate([qkv[:qk], heads_rows(qkv[qk:], dv)]))
            sd[s + "in_proj_z.weight"] = t(heads_rows(W[b + "attn_gate.weight"], dv))
            sd[s + "in_proj_b.weight"] = t(W[b + "ssm_beta.weight"][hf_from_gguf])
            sd[s + "in_proj_a.weight"] = t(W[b + "ssm_alpha.weight"][hf_from_gguf])
            sd[s + "dt_bias"] = t(W[b + "ssm_dt.bias"][hf_from_gguf])
            sd[s + "A_log"] = t(np.log(-W[b + "ssm_a"][hf_from_gguf]))
            conv = W[b + "ssm_conv1d.weight"]  # [channels, K]
            conv = np.concatenate([conv[:qk], heads_rows(conv[qk:], dv)])
            sd[s + "conv1d.weight"] = t(conv[:, None, :])
            sd[s + "norm.weight"] = t(W[b + "ssm_norm.weight"])
            out = W[b + "ssm_out.weight"]  # [d, H*dv]: columns by value head
            sd[s + "out_proj.weight"] = t(out.reshape(d, H, dv)[:, hf_from_gguf].reshape(d, H * dv))
        m = p + "mlp."
        sd[m + "gate.weight"] = t(W[b + "ffn_gate_inp.weight"])
        sd[m + "experts.gate_up_proj"] = t(np.concatenate([W[b + "ffn_gate_exps.weight"], W[b + "ffn_up_exps.weight"]], axis=1))
        sd[m + "experts.down_proj"] = t(W[b + "ffn_down_exps.weight"])
        sd[m + "shared_expert.gate_proj.weight"] = t(W[b + "ffn_gate_shexp.weight"])
        sd[m + "shared_expert.up_proj.weight"] = t(W[b + "ffn_up_shexp.weight"])
        sd[m + "shared_expert.down_proj.weight"] = t(W[b + "ffn_down_shexp.weight"])
        sd[m + "shared_expert_gate.weight"] = t(W[b + "ffn_gate_inp_shexp.weight"].reshape(1, d))

    want = model.state_dict()
    missing = sorted(set(want) - set(sd))
    extra = sorted(set(sd) - set(want))
    bad = [k for k in sd if k in want and tuple(want[k].shape) != tuple(sd[k].shape)]
    if missing or extra or bad:
        sys.exit(f"state dict mismatch: missing {missing} extra {extra} shape {[(k, tuple(want[k].shape), tuple(sd[k].shape)) for k in bad]}")
    model.load_state_dict(sd, strict=True)

    rng = np.random.default_rng(args.seed)
    tokens = rng.integers(0, V, size=args.tokens).tolist()
    ids = torch.tensor([tokens])
    with torch.no_grad():
        full = model(input_ids=ids, use_cache=False).logits[0].float().numpy()
    full.astype("<f4").tofile(args.out + ".bin")
    with open(args.out + ".txt", "w") as f:
        f.write("# golden logits from transformers Qwen3_5MoeForCausalLM (tools/oracle_qwen35moe.py)\n")
        f.write(f"synth {args.synth}\n")
        f.write(f"fnv1a64 {fnv1a64(args.model):016x}\n")
        f.write(f"n_vocab {V}\n")
        f.write(f"tokens {','.join(map(str, tokens))}\n")
    print(f"wrote {args.out}.txt/.bin: {len(tokens)} x {V}")

    # Cross-check the oracle itself: token-by-token decode through its cache
    # (recurrent delta rule) against the full pass (chunked delta rule).
    with torch.no_grad():
        out = model(input_ids=ids[:, :1], use_cache=True)
        past, steps = out.past_key_values, [out.logits[0, -1]]
        for i in range(1, len(tokens)):
            out = model(input_ids=ids[:, i:i + 1], past_key_values=past, use_cache=True)
            past = out.past_key_values
            steps.append(out.logits[0, -1])
        step = torch.stack(steps).float().numpy()
    print(f"oracle self-check: full pass vs cached decode, max abs diff {np.abs(full - step).max():.3g}")


if __name__ == "__main__":
    main()
