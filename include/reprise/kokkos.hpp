// Kokkos adapter: Runtime::protect(view) for any contiguous view in host or device memory; a non-const view variable
// is followed (swaps and reassignments), a const one captured.
#pragma once

#include <Kokkos_Core.hpp>
#include <memory>
#include <string>

#include "reprise/reprise.hpp"

namespace reprise {
namespace detail {

template <class View>
constexpr MemorySpace memory_space_of() {
  using Space = typename View::memory_space;
#if defined(KOKKOS_ENABLE_CUDA)
  // UVM and pinned host memory are host-accessible but live with the GPU: digest them there.
  if (std::is_same_v<Space, Kokkos::CudaSpace> || std::is_same_v<Space, Kokkos::CudaUVMSpace>)
    return MemorySpace::Device;
#endif
  return Kokkos::SpaceAccessibility<Kokkos::HostSpace, Space>::accessible ? MemorySpace::Host : MemorySpace::Device;
}

}  // namespace detail

/// Where a view's data live, as protect() and reprise::Comm see them (CUDA UVM counts as device memory).
template <class View>
constexpr MemorySpace memory_space_of(const View&) {
  return detail::memory_space_of<View>();
}

namespace detail {

// The region a view's buffer makes: its label and bytes, checked to be contiguous.
template <class View>
std::size_t contiguous_bytes(const View& view, const std::string& name) {
  if (!view.span_is_contiguous())
    throw UsageError("view '" + name +
                     "' is not contiguous (strided subview?): protect the whole view it comes from, "
                     "or deep_copy it into a contiguous one");
  return view.span() * sizeof(typename View::value_type);
}

template <class View>
void* data_of(const View& view) {
  return static_cast<void*>(const_cast<typename View::non_const_value_type*>(view.data()));
}

template <class View>
std::string label_of(const View& view) {
  std::string label = view.label();
  if (label.empty()) throw UsageError("a Kokkos view without a label cannot be protected: give it a name");
  return label;
}

}  // namespace detail

template <class View, class>
void Runtime::protect(const View& view) {
  static_assert(Kokkos::is_view<View>::value, "Runtime::protect(view) takes a Kokkos::View");
  const std::string label = detail::label_of(view);
  const std::size_t bytes = detail::contiguous_bytes(view, label);
  // Keep the allocation alive while it is registered, even if the application drops its handle.
  auto holder = std::make_shared<View>(view);
  protect(label, detail::data_of(view), bytes, detail::memory_space_of<View>(),
          std::shared_ptr<void>(holder, holder.get()));
  add_fence("kokkos", [] { Kokkos::fence(); });
}

template <class View, class>
void Runtime::protect(View& view) {
  static_assert(Kokkos::is_view<View>::value, "Runtime::protect(view) takes a Kokkos::View");
  const std::string label = detail::label_of(view);  // the region's name for good, whatever the variable holds later
  detail::contiguous_bytes(view, label);
  const View* handle = &view;
  protect_following(label, detail::memory_space_of<View>(), [handle, label] {
    return Located{detail::data_of(*handle), detail::contiguous_bytes(*handle, label)};
  });
  add_fence("kokkos", [] { Kokkos::fence(); });
}

}  // namespace reprise
