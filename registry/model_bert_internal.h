/*
 * model_bert_internal.h - what the two files of the BERT encoder share: the model and its layers
 * as model_bert_load.c builds them (configuration, weights in the form the chosen path
 * multiplies) and model_bert.c's forward pass reads them. Not part of the registry's API.
 */
#ifndef PTC_REGISTRY_MODEL_BERT_INTERNAL_H
#define PTC_REGISTRY_MODEL_BERT_INTERNAL_H

#include "internal.h"
#include "model_internal.h"

#include <stdbool.h>
#include <stddef.h>

enum activation { ACT_GELU_ERF, ACT_GELU_TANH, ACT_RELU };

/*
 * One linear layer, y = x W^T + b, in the form the chosen path multiplies. On the FP32 path w
 * is either the transposed copy [in, out] row-major (transposed) or the tensor as stored
 * ([out, in], PyTorch's layout): with the copy OpenBLAS multiplies without transposing while it
 * packs, which measured 15-30% faster for the [T, 384] x [384, 1152 or 1536] products (and the
 * same for [T, 1536] x [1536, 384], which therefore stays as stored, saving the copy). On the
 * BF16 path w is NULL and packed holds the weight (model_gemm.c).
 */
typedef struct linear_w {
    const float *w;
    float *copy; /* the transposed copy w points at (model_weights_alloc, linear_free), else NULL */
    bool transposed;
    model_bf16w_t packed;
    const float *b; /* [out] */
    size_t in, out;
} linear_w_t;

typedef struct layer {
    linear_w_t qkv;  /* query, key and value side by side so one product makes all three */
    linear_w_t ao;   /* attention output projection [H, H] */
    linear_w_t up;   /* feed-forward up [I, H] */
    linear_w_t down; /* feed-forward down [H, I] */
    const float *ln1_g, *ln1_b; /* LayerNorm after attention */
    const float *ln2_g, *ln2_b; /* LayerNorm after the feed-forward block */
} layer_t;

struct reg_model {
    model_tokenizer_t tok;
    model_st_t st;
    size_t hidden, heads, head_dim, inter, n_layers, vocab, max_pos, type_vocab, max_seq;
    float ln_eps;
    enum activation act;
    bool pool_cls;
    bool bf16; /* linear layers through model_gemm_bf16 (chosen at load) */
    const float *word, *pos, *type, *emb_ln_g, *emb_ln_b;
    layer_t *layers;
    /* Tensors converted or copied at load (F16/BF16 widening, unaligned data, stacked QKV). */
    void **owned;
    size_t n_owned, cap_owned;
    char prefix[16]; /* "bert." in checkpoints saved from BertFor* heads, else "" */
    char name[128];
    char dir[4096];
};

#endif /* PTC_REGISTRY_MODEL_BERT_INTERNAL_H */
