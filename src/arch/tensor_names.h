/* The GGUF tensor names of the architectures moex reads and writes, in one
 * table: the architectures (src/arch/) bind them, the synth writers
 * (src/synth/) write them. Per-layer names are the part after "blk.N.";
 * TN_LAYER(name) is the format string a binding takes ("blk.%d." name). */
#ifndef MOEX_TENSOR_NAMES_H
#define MOEX_TENSOR_NAMES_H

#define TN_LAYER(name) "blk.%d." name

/* the model */
#define TN_TOKEN_EMBD                "token_embd.weight"
#define TN_OUTPUT                    "output.weight"
#define TN_OUTPUT_NORM               "output_norm.weight"
#define TN_TOKEN_EMBD_NORM           "token_embd_norm.weight"

/* per layer */
#define TN_ATTN_GATE                 "attn_gate.weight"
#define TN_ATTN_K                    "attn_k.weight"
#define TN_ATTN_K_NORM               "attn_k_norm.weight"
#define TN_ATTN_NORM                 "attn_norm.weight"
#define TN_ATTN_OUTPUT               "attn_output.weight"
#define TN_ATTN_Q                    "attn_q.weight"
#define TN_ATTN_QKV                  "attn_qkv.weight"
#define TN_ATTN_Q_NORM               "attn_q_norm.weight"
#define TN_ATTN_V                    "attn_v.weight"
#define TN_EXP_PROBS_B               "exp_probs_b.bias"
#define TN_FFN_DOWN                  "ffn_down.weight"
#define TN_FFN_DOWN_EXPS             "ffn_down_exps.weight"
#define TN_FFN_DOWN_SHEXP            "ffn_down_shexp.weight"
#define TN_FFN_GATE                  "ffn_gate.weight"
#define TN_FFN_GATE_EXPS             "ffn_gate_exps.weight"
#define TN_FFN_GATE_INP              "ffn_gate_inp.weight"
#define TN_FFN_GATE_INP_SHEXP        "ffn_gate_inp_shexp.weight"
#define TN_FFN_GATE_SHEXP            "ffn_gate_shexp.weight"
#define TN_FFN_NORM                  "ffn_norm.weight"
#define TN_FFN_UP                    "ffn_up.weight"
#define TN_FFN_UP_EXPS               "ffn_up_exps.weight"
#define TN_FFN_UP_SHEXP              "ffn_up_shexp.weight"
#define TN_NEXTN_EH_PROJ             "nextn.eh_proj.weight"
#define TN_NEXTN_ENORM               "nextn.enorm.weight"
#define TN_NEXTN_HNORM               "nextn.hnorm.weight"
#define TN_NEXTN_SHARED_HEAD_NORM    "nextn.shared_head_norm.weight"
#define TN_POST_ATTENTION_NORM       "post_attention_norm.weight"
#define TN_SHORTCONV_CONV            "shortconv.conv.weight"
#define TN_SHORTCONV_IN_PROJ         "shortconv.in_proj.weight"
#define TN_SHORTCONV_OUT_PROJ        "shortconv.out_proj.weight"
#define TN_SSM_A                     "ssm_a"
#define TN_SSM_ALPHA                 "ssm_alpha.weight"
#define TN_SSM_BETA                  "ssm_beta.weight"
#define TN_SSM_CONV1D                "ssm_conv1d.weight"
#define TN_SSM_DT_BIAS               "ssm_dt.bias"
#define TN_SSM_NORM                  "ssm_norm.weight"
#define TN_SSM_OUT                   "ssm_out.weight"

#endif
