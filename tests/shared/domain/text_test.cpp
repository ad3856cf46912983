// UTF-8 well-formedness as RFC 3629 defines it: what the API takes as text.
#include "shared/domain/text.hpp"

#include <gtest/gtest.h>

namespace mooring::domain {
namespace {

TEST(Utf8, WellFormedTextPasses) {
  for (std::string_view s : {"", "plain ascii", "caf\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x92\xbe", "\xf4\x8f\xbf\xbf",
                             "\xed\x9f\xbf", "\xee\x80\x80"}) {
    EXPECT_TRUE(valid_utf8(s)) << s;
    EXPECT_EQ(utf8_prefix(s), s.size()) << s;
  }
}

TEST(Utf8, IllFormedTextFailsAtItsFirstBadByte) {
  struct Case {
    std::string_view text;
    std::size_t prefix;
  };
  for (const auto& c : std::vector<Case>{{"\xff\xfe", 0},               // never in UTF-8
                                         {"ab\x80", 2},                 // a lone continuation byte
                                         {"x\xc0\xaf", 1},              // overlong "/"
                                         {"\xe0\x80\xaf", 0},           // overlong, three bytes
                                         {"\xed\xa0\x80", 0},           // a surrogate (U+D800)
                                         {"\xf4\x90\x80\x80", 0},       // above U+10FFFF
                                         {"\xf5\x80\x80\x80", 0},       // never a lead byte
                                         {"ok\xe2\x82", 2},             // cut short
                                         {"\xc3\xa9\xe2\x28\xa1", 2}})  // a bad third byte
  {
    EXPECT_FALSE(valid_utf8(c.text));
    EXPECT_EQ(utf8_prefix(c.text), c.prefix) << c.text;
  }
}

}  // namespace
}  // namespace mooring::domain
