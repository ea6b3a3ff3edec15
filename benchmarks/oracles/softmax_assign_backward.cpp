// The hand-written softmax backward (softmax_backward.cpp), against the assigning sweep
// (reverse/softmax_assign_main.cpp); never part of the torchclad package.
#include "oracles/softmax_backward.cpp"
