// Reverse-sweep benchmark of the assigning variant of softmax_forward's sweep (what the op's
// backward runs: each row of d inp zeroed by the sweep and added into, the seed only read;
// engine/reverse/rows.py); see softmax_main.cpp.
#define SOFTMAX_SWEEP softmax_forward_reverse_sweep_assign
#include "reverse/softmax_main.cpp"
