#pragma once
// A tensor as host memory for code that runs on the host (the in-process communicators): host
// tensors are used as they are; a CUDA tensor is copied out once the stream's earlier work is done
// (a host sync) and, if asked, copied back in.
#include "qmoe/tensor.hpp"

namespace qmoe {

class HostStaged {
 public:
  enum Contents { read, write_only };  // write_only: an output, whose old values are not copied out
  HostStaged(TensorView t, void* stream, Contents contents = read);
  TensorView view() const { return host_; }
  // The host copy's contents back into the CUDA tensor (nothing to do for a host tensor).
  void write_back() const;

 private:
  TensorView original_, host_;
  void* stream_;
  Buffer copy_;
};

}  // namespace qmoe
