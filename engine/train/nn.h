/* The layers of braid-train's GPT: forward and backward passes on the CPU,
 * fp32, row-major, matrix work through CBLAS.
 *
 * Conventions (as llm.c): B batch, T time, C channels, NH heads, hs = C/NH
 * head size, V vocabulary, N = B*T rows, OC output channels.  Output
 * arguments come first.  In a backward function, gradients of parameters
 * (dw, db) are accumulated (+=): a step's micro-batches add up in them.
 * Whether an input gradient is overwritten or accumulated is stated per
 * function: the residual stream accumulates, everything else overwrites, so
 * no scratch buffer has to be zeroed first.
 *
 * The long backward operations (matmul, attention) call the poll hook
 * between pieces of work of about a millisecond: data-parallel training
 * progresses its pending all-reduces there, so that they move while the
 * backward pass computes instead of piling up until it ends. */
#ifndef BRAID_TRAIN_NN_H
#define BRAID_TRAIN_NN_H

#include <stddef.h>

typedef void (*braid_nn_poll_fn)(void *ctx);

/* Hook called between pieces of backward work (NULL: none).  One per
 * process: braid-train is single-threaded. */
void braid_nn_set_poll(braid_nn_poll_fn fn, void *ctx);

/* out(B,T,C) = wte[tokens[b,t]] + wpe[t]; wte (V,C), wpe (maxT,C). */
void braid_nn_encoder_forward(float *out, const int *tokens, const float *wte,
                              const float *wpe, int B, int T, int C);
/* dwte += ..., dwpe += ... from dout (B,T,C). */
void braid_nn_encoder_backward(float *dwte, float *dwpe, const float *dout,
                               const int *tokens, int B, int T, int C);

/* out(N,C) = (inp - mean) * rstd * w + b, per row; mean, rstd (N) saved
 * for the backward pass. */
void braid_nn_layernorm_forward(float *out, float *mean, float *rstd,
                                const float *inp, const float *w,
                                const float *b, int N, int C);
/* dinp(N,C) += (accumulates: it is the residual stream), dw, db += . */
void braid_nn_layernorm_backward(float *dinp, float *dw, float *db,
                                 const float *dout, const float *inp,
                                 const float *w, const float *mean,
                                 const float *rstd, int N, int C);

/* out(N,OC) = inp(N,C) @ w(OC,C)^T + b(OC); b may be NULL. */
void braid_nn_matmul_forward(float *out, const float *inp, const float *w,
                             const float *b, int N, int C, int OC);
/* dinp(N,C) = dout @ w (overwritten; NULL: not needed);
 * dw(OC,C) += dout^T @ inp;  db(OC) += column sums of dout (db may be NULL).
 */
void braid_nn_matmul_backward(float *dinp, float *dw, float *db,
                              const float *dout, const float *inp,
                              const float *w, int N, int C, int OC);

/* Causal self-attention of the T positions pos .. pos+T-1 of each of B
 * sequences.  qkv (B,S,3C), S = pos + T, holds q, k and v side by side
 * (heads within each) of every position up to the last: the queries are
 * its last T rows, and each sees the keys up to its own position.  out
 * (B,T,C); att (B,NH,T,S) keeps the softmax probabilities (zero past the
 * query's position) for the backward pass.  Training runs whole sequences
 * (pos 0); inference appends T positions of one sequence (B 1) to the
 * rows a KV cache holds.  C and NH are the heads this rank holds. */
void braid_nn_attention_forward(float *out, float *att, const float *qkv,
                                int B, int T, int pos, int C, int NH);
/* Of a forward pass with pos 0.  dqkv(B,T,3C) overwritten; scratch holds
 * T*T floats. */
void braid_nn_attention_backward(float *dqkv, float *scratch,
                                 const float *dout, const float *qkv,
                                 const float *att, int B, int T, int C,
                                 int NH);

/* GELU, tanh approximation (GPT-2's). */
void braid_nn_gelu_forward(float *out, const float *inp, size_t n);
/* dinp = dout * gelu'(inp), overwritten; dinp may be dout (in place). */
void braid_nn_gelu_backward(float *dinp, const float *inp, const float *dout,
                            size_t n);

/* out = a + b (n elements); out may alias a. */
void braid_nn_residual_forward(float *out, const float *a, const float *b,
                               size_t n);

/* In place: logits(N,V) become softmax probabilities; losses(N) =
 * -log p[target].  Returns the sum of the losses (double). */
double braid_nn_crossentropy_forward(float *probs_logits, float *losses,
                                     const int *targets, int N, int V);
/* In place: probs(N,V) become dlogits = (probs - onehot(target)) * dloss,
 * dloss the weight of each row in the loss being minimised (1/N_total for
 * a mean). */
void braid_nn_crossentropy_backward(float *probs_dlogits, const int *targets,
                                    float dloss, int N, int V);

#endif
