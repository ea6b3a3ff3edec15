// GPT-2, the whole model forward in one function (llm.c style); our own code.
//
// The translation unit is the layer kernels of torchclad.nn (csrc/kernels/encoder.cpp,
// layernorm.cpp, matmul.cpp + its custom derivative csrc/custom/matmul.cpp, attention.cpp,
// gelu.cpp, residual.cpp, crossentropy.cpp) followed by this file (KernelSpec.sources in
// torchclad/builtin/registry.py). The engine differentiates gpt2_forward as a whole: one generated
// reverse sweep that calls the generated sweeps of the layer kernels, and the one hand-written
// derivative, matmul's (BLAS), for the seven matmuls per layer and the lm_head.
//
// B = batch, T = time (`Tn` in code: `T` is the scalar type), C = channels, V = vocabulary size,
// maxT = block size (rows of wpe), NL = layers, NH = heads; N = B * T rows.
//
// T gpt2_forward(T* logits, T* acts, const T* params, const long* idx, const long* targets,
//                int B, int Tn, int C, int V, int maxT, int NL, int NH)
//   idx, targets (B, T) int64; targets[n] = -1 ignores position n (every other target and
//   every idx must be in [0, V): the caller checks, the kernels index with them).
//   Returns the mean over the non-ignored positions of -log softmax(logits)[target] (NaN when
//   every position is ignored, like torch); writes logits (B, T, V) and the activations.
//   Differentiated w.r.t. params; logits and acts are outputs (their adjoints can be seeded).
//
// params: every parameter in one flat buffer (names as in the state_dict)
//   transformer.wte.weight (V, C)  -- also lm_head.weight (tied): one buffer, one adjoint, so the
//                                     embedding's scatter-add and the lm_head matmul's d weight
//                                     accumulate into the same gradient memory
//   transformer.wpe.weight (maxT, C)
//   per layer l, PL = 13C + 12C^2 values starting at (V + maxT) * C + l * PL:
//     ln_1.weight (C), ln_1.bias (C), attn.c_attn.weight (3C, C), attn.c_attn.bias (3C),
//     attn.c_proj.weight (C, C), attn.c_proj.bias (C), ln_2.weight (C), ln_2.bias (C),
//     mlp.c_fc.weight (4C, C), mlp.c_fc.bias (4C), mlp.c_proj.weight (C, 4C), mlp.c_proj.bias (C)
//   transformer.ln_f.weight (C), transformer.ln_f.bias (C)
//   lm_head bias (V)               -- not a parameter of GPT-2: always zero
//   Every bias has a slot: with GPT2Config(bias=False) the Python side keeps them at zero and
//   drops their gradients: one layout for both, no conditional or null pointers in the kernel.
//
// acts: the activation arena, (B, T)-sized by the caller and reused from call to call. Every
//   activation has its own slot, written by one kernel call and only read after that, so acts
//   (like logits) is marked TORCHCLAD_WRITE_ONCE: the engine records none of these writes and the
//   reverse sweep reads back what the forward left. (Inside a kernel, attention's `o[i] +=` and
//   matmul's bias-then-gemm accumulate into their output: linear updates whose derivatives never
//   need the overwritten values.) AL = 18 N C + 4 N + 2 B NH T^2 values per layer:
//   encoded (N, C)                                   the input of layer 0
//   per layer: ln1 (N, C), ln1 mean (N), ln1 rstd (N), qkv (N, 3C), atty (N, C),
//     preatt (B, NH, T, T), att (B, NH, T, T), attproj (N, C), residual2 (N, C), ln2 (N, C),
//     ln2 mean (N), ln2 rstd (N), fch (N, 4C), fch_gelu (N, 4C), fcproj (N, C),
//     residual3 (N, C)                             -- the input of the next layer
//   lnf (N, C), lnf mean (N), lnf rstd (N), losses (N)
//   total N C + NL AL + N C + 3 N   (torchclad.nn.gpt2.arena_size mirrors it)
// Offsets are 64-bit (a 124M model at B = 8, T = 1024 has 3.8e9 activations); the layer kernels
// index within their slices with int.

template <typename T>
T gpt2_forward(T* TORCHCLAD_WRITE_ONCE logits, T* TORCHCLAD_WRITE_ONCE acts, const T* params,
               const long* idx, const long* targets, int B, int Tn, int C, int V, int maxT,
               int NL, int NH) {
    int N = B * Tn;
    long NC = (long)N * C;
    long PL = 13L * C + 12L * C * C;
    long AL = 18 * NC + 4L * N + 2L * B * NH * Tn * Tn;
    long TT = (long)B * NH * Tn * Tn;
    T eps = T(1e-5);

    const T* wte = params;
    const T* wpe = params + (long)V * C;
    encoder_forward(acts, idx, wte, wpe, B, Tn, C, V);

    for (int l = 0; l < NL; l++) {
        // this layer's parameters
        const T* ln1w = params + (long)(V + maxT) * C + l * PL;
        const T* ln1b = ln1w + C;
        const T* qkvw = ln1b + C;
        const T* qkvb = qkvw + 3L * C * C;
        const T* attprojw = qkvb + 3 * C;
        const T* attprojb = attprojw + (long)C * C;
        const T* ln2w = attprojb + C;
        const T* ln2b = ln2w + C;
        const T* fcw = ln2b + C;
        const T* fcb = fcw + 4L * C * C;
        const T* fcprojw = fcb + 4 * C;
        const T* fcprojb = fcprojw + 4L * C * C;
        // this layer's activations; its input is the previous layer's residual3 (or encoded)
        const T* resid = acts + l * AL;
        T* ln1 = acts + NC + l * AL;
        T* ln1_mean = ln1 + NC;
        T* ln1_rstd = ln1_mean + N;
        T* qkv = ln1_rstd + N;
        T* atty = qkv + 3 * NC;
        T* preatt = atty + NC;
        T* att = preatt + TT;
        T* attproj = att + TT;
        T* residual2 = attproj + NC;
        T* ln2 = residual2 + NC;
        T* ln2_mean = ln2 + NC;
        T* ln2_rstd = ln2_mean + N;
        T* fch = ln2_rstd + N;
        T* fch_gelu = fch + 4 * NC;
        T* fcproj = fch_gelu + 4 * NC;
        T* residual3 = fcproj + NC;

        layernorm_forward(ln1, ln1_mean, ln1_rstd, resid, ln1w, ln1b, N, C, eps);
        matmul_forward(qkv, ln1, qkvw, qkvb, N, C, 3 * C);
        attention_forward(atty, preatt, att, qkv, B, Tn, C, NH);
        matmul_forward(attproj, atty, attprojw, attprojb, N, C, C);
        residual_forward(residual2, resid, attproj, N * C);
        layernorm_forward(ln2, ln2_mean, ln2_rstd, residual2, ln2w, ln2b, N, C, eps);
        matmul_forward(fch, ln2, fcw, fcb, N, C, 4 * C);
        gelu_forward(fch_gelu, fch, 4 * N * C);
        matmul_forward(fcproj, fch_gelu, fcprojw, fcprojb, N, 4 * C, C);
        residual_forward(residual3, residual2, fcproj, N * C);
    }

    const T* lnfw = params + (long)(V + maxT) * C + NL * PL;
    const T* lnfb = lnfw + C;
    const T* lm_head_bias = lnfb + C;
    const T* last = acts + NL * AL;
    T* lnf = acts + NC + NL * AL;
    T* lnf_mean = lnf + NC;
    T* lnf_rstd = lnf_mean + N;
    T* losses = lnf_rstd + N;
    layernorm_forward(lnf, lnf_mean, lnf_rstd, last, lnfw, lnfb, N, C, eps);
    matmul_forward(logits, lnf, wte, lm_head_bias, N, C, V);  // lm_head, tied to wte
    crossentropy_forward(losses, logits, targets, N, V);

    // mean over the positions that are not ignored
    T total = 0;
    int count = 0;
    for (int n = 0; n < N; n++) {
        if (targets[n] >= 0) {
            total += losses[n];
            count++;
        }
    }
    T mean = total / count;
    return mean;
}
