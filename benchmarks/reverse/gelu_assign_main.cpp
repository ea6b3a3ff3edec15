// Reverse-sweep benchmark of the assigning variant of gelu_forward's sweep (what the op's
// backward runs: d inp written, the seed only read; engine/reverse/assign.py); see gelu_main.cpp.
#define GELU_SWEEP gelu_forward_reverse_sweep_assign
#include "reverse/gelu_main.cpp"
