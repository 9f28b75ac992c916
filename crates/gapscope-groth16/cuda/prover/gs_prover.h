/* gapscope native Groth16 prover (BLS12-381) over sppark: C ABI used by src/prover/cuda/.
 *
 * Points and scalars cross in blst's Montgomery layout, which blstrs and sppark share:
 * G1 affine 96 bytes, G2 affine 192, G1 Jacobian 144, G2 Jacobian 288, Fr 32. Every call
 * returns a gs_status by value; a non-zero code carries a malloc'd message the caller frees
 * with free(). Nothing here aborts the process on a CUDA error or a failed allocation.
 */
#ifndef GS_PROVER_H
#define GS_PROVER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int32_t code; /* 0: success; a cudaError_t, or GS_E_* below */
    char *message;
} gs_status;

#define GS_E_ARGUMENT 1001   /* shapes or arguments do not fit the SRS */
#define GS_E_HOST_MEMORY 1002 /* a host allocation failed */
#define GS_E_NO_GPU 1003     /* no usable CUDA device */
#define GS_E_INTERNAL 1004   /* any other exception */

/* One synthesised circuit: density bitmaps (64-bit words, bit i = variable i is in the
 * query), a/b/c evaluations, input and aux assignments. */
typedef struct {
    const uint64_t *a_aux_density;
    size_t a_aux_bits, a_aux_popcount;
    const uint64_t *b_inp_density;
    size_t b_inp_bits, b_inp_popcount;
    const uint64_t *b_aux_density;
    size_t b_aux_bits, b_aux_popcount;
    const void *a, *b, *c;
    size_t abc_len;
    const void *inputs;
    size_t num_inputs;
    const void *aux;
    size_t num_aux;
} gs_circuit;

/* The SRS's query points (affine). h has domain - 1 points. */
typedef struct {
    const void *h;
    size_t h_len;
    const void *l;
    size_t l_len;
    const void *a;
    size_t a_len;
    const void *b_g1;
    size_t b_g1_len;
    const void *b_g2; /* G2 */
    size_t b_g2_len;
} gs_srs_points;

typedef struct {
    uint32_t pinned;  /* host_memory = pinned: a/b/c staged through pinned buffers */
    uint32_t streams; /* 1: a, b, c NTTs one after another; 2: b and c on a second stream */
    uint32_t gpus;    /* GPUs to split the batch over (0: every GPU the SRS is on) */
    uint32_t split_threads; /* 1: the split MSMs (L, A, B-G1, B-G2) one after another
                               after H; 4: each on its own host thread, beside H; 8: two
                               threads per query, each with every other circuit */
    uint32_t ntt_overlap;   /* 0: every circuit's NTTs, then the MSMs; 1: the NTTs on their
                               own host thread, each circuit's H MSM right after its NTTs */
    uint32_t h_threads;     /* 1: the H MSMs one after another; 2: every other circuit's on
                               a second host thread */
    uint32_t prep_threads;  /* worker threads of prep (0: half the cores) */
} gs_options;

/* Per-circuit MSM results (Jacobian), written by gs_prove; the host assembles proofs. */
typedef struct {
    void *h, *l, *a, *b_g1; /* G1 Jacobian, one per circuit */
    void *b_g2;             /* G2 Jacobian, one per circuit */
} gs_results;

typedef struct gs_srs gs_srs;
typedef struct gs_batch gs_batch;

/* Number of usable CUDA devices (0 with a status saying why). */
gs_status gs_device_count(uint32_t *count);

/* Uploads the SRS to `max_gpus` devices (0: all) and keeps it resident. */
gs_status gs_srs_load(const gs_srs_points *points, uint32_t max_gpus, gs_srs **out);
void gs_srs_free(gs_srs *srs);
uint32_t gs_srs_gpus(const gs_srs *srs);

/* Proves the MSM part of `n` circuits, split across the SRS's GPUs (one host thread per
 * GPU, GPU 0 on the calling thread). Spans: entry, split_vectors_alloc, prep (prep
 * thread, `pack` spans on its workers), kernels { ntt_h (on its own thread with
 * ntt_overlap), msm_h (ntt_wait), prep_wait, msm_l, msm_a,
 * msm_b_g1, msm_b_g2 }. The buffers it allocated are handed back in *batch (also on failure, when
 * non-null): free them with gs_batch_drop. */
gs_status gs_prove(gs_srs *srs, const gs_circuit *circuits, size_t n, const gs_options *opts,
                   gs_results *out, gs_batch **batch);

/* Frees a batch's host and device buffers inside a `drop` span: on this thread, or with
 * async != 0 on the prover's background drop thread (span parented to the caller's span). */
void gs_batch_drop(gs_batch *batch, int async);
/* Waits until the background drop thread is idle. */
void gs_drop_wait(void);

/* Checks for the GPU self-test, on device 0, points and scalars in host memory, results
 * back in host memory: MSMs through the prover's split path (batch addition of the bases
 * of 1 scalars, 0 scalars skipped, Pippenger over the rest), and NTTs. */
gs_status gs_msm_g1(const void *points, const void *scalars, size_t n, void *out_jacobian);
gs_status gs_msm_g2(const void *points, const void *scalars, size_t n, void *out_jacobian);
/* Parameter generation: out[i] = scalars[i]·base for one fixed base (affine in, affine
 * out, infinity as all zeros), on device 0. */
gs_status gs_fixed_base_g1(const void *base, const void *scalars, size_t n, void *out_affine);
gs_status gs_fixed_base_g2(const void *base, const void *scalars, size_t n, void *out_affine);
/* In-place NTT of 2^lg scalars: inverse != 0 for the inverse transform, coset != 0 for
 * the coset (generator 7) variant; natural order in and out. */
gs_status gs_ntt(void *scalars, uint32_t lg, int inverse, int coset);

#ifdef __cplusplus
}
#endif

#endif /* GS_PROVER_H */
