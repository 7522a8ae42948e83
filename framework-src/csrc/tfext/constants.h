// Constants shared by the CPU, GPU and XLA kernels (plain C++: usable in device code).
#ifndef TFEXT_CONSTANTS_H_
#define TFEXT_CONSTANTS_H_

namespace tfext {

// sqrt(2 / pi) and the cubic coefficient of the tanh approximation of GELU, as
// tf.nn.gelu(approximate=True) writes them.
constexpr double kGeluScale = 0.7978845608028654;
constexpr double kGeluCubic = 0.044715;

}  // namespace tfext

#endif  // TFEXT_CONSTANTS_H_
