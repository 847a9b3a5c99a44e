#include "server/common/shared_text.h"

namespace symdex {

const std::string& SharedText::Empty() {
  static const std::string empty;
  return empty;
}

SharedText::SharedText(std::string_view s) {
  if (s.empty()) return;
  // The values this thread made last: a section name or a note recurs symbol after symbol.
  struct Recent {
    SharedText slots[kRecent];
    size_t next = 0;
  };
  thread_local Recent recent;
  for (const SharedText& r : recent.slots) {
    if (r.node_ != nullptr && r.node_->text == s) {
      node_ = r.node_;
      Ref();
      return;
    }
  }
  node_ = new Node;
  node_->text.assign(s);
  recent.slots[recent.next] = *this;
  recent.next = (recent.next + 1) % kRecent;
}

}  // namespace symdex
