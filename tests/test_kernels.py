"""Kernel-name taxonomy: the family, TF32, data type and host copies of real kernel names."""

from __future__ import annotations

import re
from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brrr_trace.analyzers.kernels import is_host_copy, is_tf32_kernel, kernel_dtype, kernel_kind
from brrr_trace.vocabulary import KernelKind
from tests.public_scan import PublicScan

# --- kernel names --------------------------------------------------------------------------------

# Real names from the public traces (some shortened after their template arguments).
KERNELS = [
    ("volta_sgemm_64x64_nt", KernelKind.GEMM),
    ("ampere_sgemm_128x64_tn", KernelKind.GEMM),
    (
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_tn_align1>(x::Params)",
        "gemm",
    ),
    (
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_"
        "segment_k_off_kernel__5x_cublas",
        KernelKind.GEMM,
    ),
    ("nvjet_tst_64x64_64x16_2x1_2cta_v_bz_bias_TNT", KernelKind.GEMM),
    ("Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x192x64_MI16x16x1_SN_LDSB1", "gemm"),
    ("void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4>(p)", "gemm"),
    ("bmm_MxE4m3_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32_cga1x1x1", "gemm"),
    (
        "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128"
        "x16_stage4_warpsize2x2x1_g1_tensor16x8x8_alignc4_execute_kernel_cudnn",
        KernelKind.CONV,
    ),
    ("cudnn_volta_scudnn_winograd_128x128_ldg1_ldg4_relu_tile148t_nt_v1", KernelKind.CONV),
    ("void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>(int, int)", "conv"),
    ("void implicit_convolve_sgemm<float, float, 1024, 6, 7, 3, 3, 5, 1, false>(int)", "conv"),
    ("igemm_fwd_gtcx3_nhwc_bf16_bx0_ex1_bt256x128x32", KernelKind.CONV),
    (
        "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, "
        "128, 4, false, false, cutlass::bfloat16_t>>(pytorch_flash::Flash_fwd_params)",
        KernelKind.ATTENTION,
    ),
    ("fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvCausalP16VarSeqQ128Kv128", "attention"),
    (
        "fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel)",
        "attention",
    ),
    ("attn_fwd", KernelKind.ATTENTION),
    (
        "void paged_attention_ll4mi_QKV_mfma16_kernel<0, __hip_bfloat16, __hip_bfloat16, "
        "(vllm::Fp8KVCacheDataType)0, 1, 128, 256, false, 4>(p)",
        KernelKind.ATTENTION,
    ),
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
        "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, "
        "at::detail::Array<char*, 3>)",
        KernelKind.ELEMENTWISE,
    ),
    ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda>(x)", "e"),
    ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<f>>(int, f)", "e"),
    ("triton_poi_fused__unsafe_view_mul_silu_2", KernelKind.ELEMENTWISE),
    ("triton_poi_fused__scaled_dot_product_flash_attention_transpose_0", KernelKind.ELEMENTWISE),
    (
        "void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>, float>(int)",
        KernelKind.ELEMENTWISE,
    ),
    ("void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int>(x)", "e"),
    ("void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true>(p)", "e"),
    ("batched_transpose_32x32_half", KernelKind.ELEMENTWISE),
    ("SubTensorOpWithScalar1d", KernelKind.ELEMENTWISE),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, MeanOps<float>>>(x)", "r"),
    ("triton_red_fused_add_mean_mul_pow_rsqrt_0", KernelKind.REDUCTION),
    ("triton_per_fused__softmax_0", KernelKind.SOFTMAX),
    ("void splitKreduce_kernel<float, float, float, float, true, false, false>(p)", "r"),
    ("void at::native::(anonymous namespace)::max_pool_forward_nchw<float, float>(int)", "r"),
    (
        "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int)",
        "n",
    ),
    ("void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 512, true, 1>(float)", "n"),
    ("void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(p)", KernelKind.NORM),
    ("void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, true>(x)", "s"),
    ("void at::native::cunn_SoftMaxForward<4, float, float, float>(float*)", "s"),
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", KernelKind.COMMUNICATION),
    ("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)", KernelKind.COMMUNICATION),
    ("void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(x)", "comm"),
    (
        "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1"
        "_kernel0_0",
        KernelKind.ATTENTION,
    ),
    ("nvjet_sm90_tst_192x192_64x3_2x1_v_bz_coopB_NNN", KernelKind.GEMM),
    ("void cudnn::fusion::convert_dq_to_16bits<true>(void const*, void*, unsigned int)", "e"),
    ("void at::native::(anonymous namespace)::compute_grad_weight<float, long>(long const*)", "e"),
    ("Memcpy HtoD (Pageable -> Device)", KernelKind.MEMCPY),
    ("Memcpy DtoD (Device -> Device)", KernelKind.MEMCPY),
    ("Memset (Device)", KernelKind.MEMSET),
    ("void cub::DeviceRadixSortOnesweepKernel<cub::DeviceRadixSortPolicy<long, int>>(int*)", "o"),
    ("", KernelKind.OTHER),
]
_SHORT = {
    "gemm": KernelKind.GEMM,
    "conv": KernelKind.CONV,
    "attention": KernelKind.ATTENTION,
    "e": KernelKind.ELEMENTWISE,
    "r": KernelKind.REDUCTION,
    "n": KernelKind.NORM,
    "s": KernelKind.SOFTMAX,
    "comm": KernelKind.COMMUNICATION,
    "o": KernelKind.OTHER,
}


@pytest.mark.parametrize(("name", "kind"), KERNELS)
def test_kernel_kind_of_real_names(name: str, kind: KernelKind | str) -> None:
    expected = kind if isinstance(kind, KernelKind) else _SHORT[kind]
    assert kernel_kind(name) == expected


def test_parameter_lists_do_not_decide_the_kind() -> None:
    # fbgemm's FixedDivisor in the parameters once made this a GEMM
    name = (
        "void split_embedding_codegen_forward_unweighted_kernel<c10::Half, c10::Half, float>"
        "(at::GenericPackedTensorAccessor<int, 1ul>, fbgemm_gpu::FixedDivisor, bool)"
    )
    assert kernel_kind(name) == KernelKind.ELEMENTWISE


@pytest.mark.parametrize(
    ("name", "tf32"),
    [
        ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4>(p)", True),
        ("sm80_xmma_gemm_tf32f32_tf32f32_f32_tn_n_tilesize128x128x16", True),
        ("sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc", True),
        ("volta_sgemm_64x64_nt", False),
        ("ampere_sgemm_128x64_tn", False),
        ("cutlass_80_simt_sgemm_128x32_8x5_nn_align1", False),
        ("cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_nn_align1", False),
        ("cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8", False),
        ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", False),
        # H200 fixtures: TF32 off (ffma SIMT) and on
        (
            "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize256x128x8_stage3_warpsize4x2x1_ffma",
            False,
        ),
        ("sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x256x32_warpgroupsize2x1x1", True),
    ],
)
def test_is_tf32_kernel(name: str, tf32: bool) -> None:
    assert is_tf32_kernel(name) is tf32


@pytest.mark.parametrize(
    ("name", "dtype"),
    [
        ("volta_sgemm_64x64_nt", "fp32"),
        ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn", "bf16"),
        (
            "void at::native::reduce_kernel<512, 1, "
            "ReduceOp<float, MeanOps<c10::BFloat16, float>>>",
            "bf16",
        ),
        ("void softmax_warp_forward<c10::Half, c10::Half, float, 10>(c10::Half*)", "fp16"),
        ("fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvCausal", "fp8"),
        ("void unrolled_elementwise_kernel<CUDAFunctor_add<double>, Array<char*, 3>>(int)", "fp64"),
        ("void vectorized_elementwise_kernel<4, MulScalarFunctor<float, double>>(int)", "fp32"),
        ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)", None),
    ],
)
def test_kernel_dtype(name: str, dtype: str | None) -> None:
    assert kernel_dtype(name) == dtype


def test_host_copies() -> None:
    assert is_host_copy("Memcpy HtoD (Pageable -> Device)")
    assert is_host_copy("Memcpy DtoH (Device -> Pinned)")
    assert not is_host_copy("Memcpy DtoD (Device -> Device)")


# --- the public traces ---------------------------------------------------------------------------

_MATRIX_LOOKING = re.compile(
    r"(?<!fb)gemm|gemv|cijk_|nvjet|xmma|tensorop|flash|fmha|attention|attn_fwd|conv|scudnn", re.I
)


def test_public_kernels_no_matrix_kernel_is_other(public_scan: PublicScan) -> None:
    kinds = {name: kernel_kind(name) for name in public_scan.kernel_us}
    assert len(kinds) > 500
    missed = [n for n, k in kinds.items() if k == KernelKind.OTHER and _MATRIX_LOOKING.search(n)]
    assert not missed, missed[:5]
    total = sum(public_scan.kernel_us.values())
    other = sorted(
        ((us, n) for n, us in public_scan.kernel_us.items() if kinds[n] == KernelKind.OTHER),
        reverse=True,
    )
    print("\nOTHER kernels in the public traces (ms, name):")
    for us, name in other[:15]:
        print(f"  {us / 1e3:9.1f}  {name[:110]}")
    assert sum(us for us, _ in other) < 0.01 * total
    by_kind: dict[KernelKind, float] = defaultdict(float)
    for name, us in public_scan.kernel_us.items():
        by_kind[kinds[name]] += us
    # the public traces are dominated by fp32 GEMMs, convolutions and NCCL
    for kind in (KernelKind.GEMM, KernelKind.CONV, KernelKind.COMMUNICATION):
        assert by_kind[kind] > 0.15 * total, kind


# --- odd input -----------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_kernel_name_functions_never_raise(name) -> None:
    assert isinstance(kernel_kind(name), KernelKind)
    kernel_dtype(name)
    is_tf32_kernel(name)


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("SOFTMAX_Kernel<float>", KernelKind.SOFTMAX),  # ASCII: lowered, searched as is
        ("Sm90_XMMA_GEMM_bf16", KernelKind.GEMM),
        # Not ASCII: matched with re.IGNORECASE, whose folding str.lower does not reproduce
        # ("ſ", the long s, folds to "s"; "K", the Kelvin sign, to "k").
        ("\u017foftmax_kernel", KernelKind.SOFTMAX),
        ("\u212av_indices_copy", KernelKind.ELEMENTWISE),
    ],
)
def test_names_match_in_any_case(name: str, kind: KernelKind) -> None:
    assert kernel_kind(name) is kind


# --- plain-word alternatives ---------------------------------------------------------------------


def _all_patterns() -> list:
    from brrr_trace.analyzers import kernels

    found = []
    for value in vars(kernels).values():
        if isinstance(value, kernels._Words):
            found.append(value)
        elif isinstance(value, tuple):
            found += [
                v[1] for v in value if isinstance(v, tuple) and isinstance(v[-1], kernels._Words)
            ]
    assert len(found) > 20
    return found


def test_found_answers_as_the_whole_regex_on_real_names(public_scan: PublicScan) -> None:
    names = [name for name, _ in KERNELS] + list(public_scan.kernel_us)
    for pattern in _all_patterns():
        for name in names:
            assert pattern.found(name) == (pattern.search(name) is not None), (pattern, name)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="abcdefghilmnoprstuvwxyz_:0123456789 <>ABGHK\u017f\u212a", max_size=60))
def test_found_answers_as_the_whole_regex_on_any_text(text: str) -> None:
    for pattern in _all_patterns():
        assert pattern.found(text) == (pattern.search(text) is not None), (pattern, text)


def test_plain_alternatives_split_only_at_the_top_level() -> None:
    from brrr_trace.analyzers.kernels import _plain_alternatives

    assert _plain_alternatives(r"nccl|(?<![a-z])(all_?reduce|x)|a::b|[|(]z|q\|r") == (
        ("nccl", "a::b"),
        r"(?<![a-z])(all_?reduce|x)|[|(]z|q\|r",
    )
    assert _plain_alternatives("softmax") == (("softmax",), None)
