// Conversations the chat templates are rendered over: plain turns, a system prompt, tools with
// tool calls and their results, reasoning (as reasoning_content and inline <think>), Unicode and
// whitespace to trim, null content. Each is rendered with add_generation_prompt true and false,
// and with enable_thinking unset, true and false.
const weather = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Get the current weather in a city",
    parameters: {
      type: "object",
      properties: {
        city: { type: "string", description: "The city, e.g. Paris" },
        unit: { type: "string", enum: ["celsius", "fahrenheit"] },
      },
      required: ["city"],
    },
  },
};
const search = {
  type: "function",
  function: {
    name: "search",
    description: "Search the web → results «quoted»",
    parameters: { type: "object", properties: { query: { type: "string" }, limit: { type: "integer", default: 5 } } },
  },
};

export const conversations = {
  single_user: { messages: [{ role: "user", content: "Hello!" }] },
  system_user: {
    messages: [
      { role: "system", content: "You are a helpful assistant." },
      { role: "user", content: "What is 2+2?" },
    ],
  },
  multi_turn: {
    messages: [
      { role: "system", content: "Be brief." },
      { role: "user", content: "Hi" },
      { role: "assistant", content: "Hello! How can I help?" },
      { role: "user", content: "Tell me a joke." },
    ],
  },
  multi_turn_no_system: {
    messages: [
      { role: "user", content: "  padded question \n" },
      { role: "assistant", content: "\nan answer  " },
      { role: "user", content: "Und jetzt auf Deutsch? 日本語も 🙂" },
    ],
  },
  tools_call_and_result: {
    tools: [weather, search],
    messages: [
      { role: "system", content: "You can call tools." },
      { role: "user", content: "Weather in Paris?" },
      {
        role: "assistant",
        content: "",
        tool_calls: [
          { id: "call_1", type: "function", function: { name: "get_weather", arguments: { city: "Paris", unit: "celsius" } } },
        ],
      },
      { role: "tool", tool_call_id: "call_1", name: "get_weather", content: '{"temperature": 21, "sky": "clear"}' },
      { role: "assistant", content: "It is 21 °C and clear in Paris." },
      { role: "user", content: "Thanks" },
    ],
  },
  tools_string_arguments: {
    tools: [weather],
    messages: [
      { role: "user", content: "Weather in Rome and Oslo?" },
      {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: "a", type: "function", function: { name: "get_weather", arguments: '{"city": "Rome"}' } },
          { id: "b", type: "function", function: { name: "get_weather", arguments: '{"city": "Oslo"}' } },
        ],
      },
      { role: "tool", tool_call_id: "a", content: "sunny" },
      { role: "tool", tool_call_id: "b", content: "snow" },
    ],
  },
  tools_only_declared: {
    tools: [search],
    messages: [{ role: "user", content: "Find the Jinja docs" }],
  },
  reasoning_content: {
    messages: [
      { role: "user", content: "Is 17 prime?" },
      { role: "assistant", reasoning_content: "Check divisors up to 4.", content: "Yes, 17 is prime." },
      { role: "user", content: "And 21?" },
    ],
  },
  inline_think: {
    messages: [
      { role: "user", content: "Add 2 and 3" },
      { role: "assistant", content: "<think>\n2 + 3 = 5\n</think>\n\nThe sum is 5." },
      { role: "user", content: "Now multiply them" },
      { role: "assistant", content: "<think>\n2 * 3 = 6\n</think>\n\n6" },
    ],
  },
  content_parts: {
    messages: [
      { role: "user", content: [{ type: "text", text: "Describe this " }, { type: "image" }, { type: "text", text: " please" }] },
    ],
  },
  system_only_first_turn_alternation_error: {
    messages: [
      { role: "user", content: "one" },
      { role: "user", content: "two" },
    ],
  },
};

export const variants = [
  { add_generation_prompt: true },
  { add_generation_prompt: false },
  { add_generation_prompt: true, enable_thinking: true },
  { add_generation_prompt: true, enable_thinking: false },
  { add_generation_prompt: false, enable_thinking: false },
];
