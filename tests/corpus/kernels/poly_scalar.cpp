// Polynomial and rational arithmetic on two scalars.
// f = 3x²y − x/y + 2   →   ∂f/∂x = 6xy − 1/y,   ∂f/∂y = 3x² + x/y².
double poly_scalar(double x, double y) {
  return 3.0 * x * x * y - x / y + 2.0;
}
