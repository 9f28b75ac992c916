// k_i·G for one fixed base G and many scalars k_i: the parameter generator's bulk work
// (every query of a Groth16 SRS is a fixed generator times scalars from the QAP).
//
// 8-bit windows over a table of d·2^(8w)·G (w = 0..31, d = 1..255) built on the host:
// each point takes at most 32 mixed additions in XYZZ, then one inversion to affine. No
// addition meets its own operand or its negation: before window w the sum is a multiple
// of G below 2^(8w), the table entry a non-zero multiple of 2^(8w), and scalars are
// reduced (< r), so two such multiples never agree modulo r.
#ifndef GS_FIXED_BASE_CUH
#define GS_FIXED_BASE_CUH

#define GS_FB_WBITS 8
#define GS_FB_WINS 32
#define GS_FB_DIGITS 255

// out[i] = scalars[i]·G, affine (infinity as (0, 0), as blst writes it). One thread per
// point for G1; a pair of threads per point for G2 (sppark spreads an fp2 over two lanes).
// sppark's inversion pairs lanes through full-warp shuffles, so every lane of a warp must
// reach it: there is no grid-stride loop and no branch around it; lanes past the end
// compute the last point again and do not store it.
template <class bucket_T, class affine_T, class field_T>
__launch_bounds__(256) __global__ void gs_fixed_base(typename affine_T::mem_t *out,
                                                     const typename affine_T::mem_t *table,
                                                     const fr_t *scalars, size_t n)
{
#ifdef __CUDA_ARCH__ // the host pass sees blst's host field types, whose limbs are private
    typedef typename field_T::mem_t field_h;
    struct xyzz_mem {
        field_h X, Y, ZZZ, ZZ;
    };
    struct affine_mem {
        field_h X, Y;
    };
    const uint32_t degree = bucket_T::degree;
    size_t i = (threadIdx.x + (size_t)blockIdx.x * blockDim.x) / degree;
    bool live = i < n;
    fr_t s = scalars[live ? i : n - 1];
    s.from();
    bucket_T acc;
    acc.inf();
    for (uint32_t w = 0; w < GS_FB_WINS; w++) {
        uint32_t d = (s[w / 4] >> (8 * (w % 4))) & 0xff;
        if (d) {
            affine_T p = table[w * GS_FB_DIGITS + d - 1];
            if (degree == 2)
                acc.uadd(p);
            else
                acc.add(p);
        }
    }
    // XYZZ's coordinates are private: read them back through its memory layout.
    typename bucket_T::mem_t m;
    m = acc;
    const xyzz_mem &r = *reinterpret_cast<const xyzz_mem *>(&m);
    field_T X = r.X, Y = r.Y, ZZZ = r.ZZZ, ZZ = r.ZZ;
    // At infinity ZZZ = ZZ = 0, the inverse of 0 is 0, and both coordinates come out 0.
    field_T ya = 1 / ZZZ; // 1/Z^3
    field_T xa = ya * ZZ; // 1/Z
    xa = xa * xa;         // 1/Z^2
    xa = xa * X;
    ya = ya * Y;
    if (live) {
        affine_mem &o = *reinterpret_cast<affine_mem *>(&out[i]);
        o.X = xa;
        o.Y = ya;
    }
#endif
}
template __global__ void gs_fixed_base<bucket_t, affine_t, fp_t>(affine_t::mem_t *,
                                                                 const affine_t::mem_t *,
                                                                 const fr_t *, size_t);
template __global__ void gs_fixed_base<bucket_fp2_t, affine_fp2_t, fp2_t>(
    affine_fp2_t::mem_t *, const affine_fp2_t::mem_t *, const fr_t *, size_t);

#ifndef __CUDA_ARCH__
namespace {

// table[w·255 + d − 1] = d·2^(8w)·base, affine, on the host.
template <class point_T, class affine_T>
std::vector<affine_T> fixed_base_table(const affine_T &base)
{
    std::vector<affine_T> table((size_t)GS_FB_WINS * GS_FB_DIGITS);
    point_T b = base; // 2^(8w)·base
    for (uint32_t w = 0; w < GS_FB_WINS; w++) {
        point_T cur = b;
        table[w * GS_FB_DIGITS] = cur;
        cur.dbl();
        table[w * GS_FB_DIGITS + 1] = cur;
        for (uint32_t d = 3; d <= GS_FB_DIGITS; d++) {
            cur.add(b);
            table[w * GS_FB_DIGITS + d - 1] = cur;
        }
        for (int k = 0; k < GS_FB_WBITS; k++)
            b.dbl();
    }
    return table;
}

// Runs the kernel over the scalars in chunks that bound the GPU memory it takes.
template <class bucket_T, class point_T, class affine_T, class field_T>
void fixed_base(const void *base, const void *scalars, size_t n, void *out)
{
    typedef typename affine_T::mem_t affine_h;
    usable_devices();
    const gpu_t &gpu = select_gpu(0);
    gpu.select();
    std::vector<affine_T> table =
        fixed_base_table<point_T, affine_T>(*static_cast<const affine_T *>(base));
    dev_buf d_table(gpu.id(), table.size() * sizeof(affine_T));
    d_table.upload(table.data(), table.size() * sizeof(affine_T));
    const size_t chunk = std::min<size_t>(n, (size_t)1 << 22);
    dev_buf d_scalars(gpu.id(), std::max<size_t>(chunk, 1) * sizeof(fr_t));
    dev_buf d_out(gpu.id(), std::max<size_t>(chunk, 1) * sizeof(affine_T));
    const stream_t &s = gpu[0];
    for (size_t off = 0; off < n; off += chunk) {
        size_t len = std::min(chunk, n - off);
        s.HtoD(d_scalars.as<fr_t>(), static_cast<const fr_t *>(scalars) + off, len);
        size_t threads = len * bucket_T::degree;
        gs_fixed_base<bucket_T, affine_T, field_T>
            <<<(unsigned)((threads + 255) / 256), 256, 0, s>>>(
                d_out.as<affine_h>(), d_table.as<affine_h>(), d_scalars.as<fr_t>(), len);
        check(cudaGetLastError(), "fixed-base kernel");
        s.DtoH(static_cast<affine_T *>(out) + off, d_out.as<void>(), len);
        s.sync();
    }
}

} // namespace
#endif

#endif // GS_FIXED_BASE_CUH
