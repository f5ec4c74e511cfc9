// Included first in every translation unit that may see protobuf headers, in ThreadSanitizer
// builds only (see CMakeLists.txt, floodgate_rls_proto).
//
// protobuf 3.21's map_field.h gives internal::MapFieldBase two extra members (seq1_, seq2_, a
// check of const/mutable races) when it sees __SANITIZE_THREAD__ or THREAD_SANITIZER. The
// libprotobuf we link (Debian's) is compiled without ThreadSanitizer, so its code — the
// constructors and reflection of google.protobuf.Struct and Value, the out-of-line MapFieldBase
// methods — uses the layout without them, while a TSan-compiled caller's inline accessors used the
// layout with them: 8 bytes apart (sizeof(Struct) 144 in the library, 152 here), and
// Map::operator[] on a Struct the library built read its bucket table from the wrong offset.
// Reading map_field.h once with the macros hidden makes every object agree with the library.
// libstdc++'s own ThreadSanitizer switch (_GLIBCXX_TSAN, used by shared_ptr) is fixed in
// c++config.h, read before the macros are hidden, so it stays on.
#pragma once

#include <cstddef>

#pragma push_macro("__SANITIZE_THREAD__")
#pragma push_macro("THREAD_SANITIZER")
#undef __SANITIZE_THREAD__
#undef THREAD_SANITIZER
#include <google/protobuf/map_field.h>
#pragma pop_macro("THREAD_SANITIZER")
#pragma pop_macro("__SANITIZE_THREAD__")
