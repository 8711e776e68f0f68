#include <gtest/gtest.h>

#include "chat/jinja_template.h"

TEST(ChatJinja, Smoke) {
    EXPECT_EQ(specula::render_chat_template("a{{ 1 + 2 }}", nlohmann::json::object()), "a3");
}
