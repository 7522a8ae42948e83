// XLA's client builder for the lowerings in csrc/xla/: TensorFlow 2.18 and later ship it
// as xla/hlo/builder/ (its include root is TensorFlow's), earlier wheels as
// tensorflow/compiler/xla/client/. The API the lowerings use is the same in both.
#ifndef TFEXT_XLA_H_
#define TFEXT_XLA_H_

#include "tensorflow/compiler/tf2xla/xla_op_kernel.h"
#include "tensorflow/compiler/tf2xla/xla_op_registry.h"
#if __has_include("xla/hlo/builder/xla_builder.h")
#include "xla/hlo/builder/lib/constants.h"
#include "xla/hlo/builder/xla_builder.h"
#else
#include "tensorflow/compiler/xla/client/lib/constants.h"
#include "tensorflow/compiler/xla/client/xla_builder.h"
#endif

#endif  // TFEXT_XLA_H_
