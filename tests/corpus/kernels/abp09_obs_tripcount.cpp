// AD-BUG-PATTERNS 9: the trip count is read from the data, (int)obs[0].
// f = Σ_{i < (int)obs0} (a x_i + obs_{i+1} a²):  ∂/∂obs0 = 0,  ∂/∂obs_{i+1} = a² for i < (int)obs0,
// ∂/∂x_i = a for i < (int)obs0,  ∂/∂a = Σ (x_i + 2a obs_{i+1}).
double abp09_obs_tripcount(const double* obs, const double* x, double a) {
  double s = 0.0;
  for (int i = 0; i < (int)obs[0]; ++i) s += a * x[i] + obs[i + 1] * a * a;
  return s;
}
