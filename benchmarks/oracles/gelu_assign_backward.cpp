// The hand-written GELU backward (gelu_backward.cpp), against the assigning sweep
// (reverse/gelu_assign_main.cpp); never part of the torchclad package.
#include "oracles/gelu_backward.cpp"
