"""The model layer: one provider interface (`api.Provider`), the OpenAI-compatible provider on the
official `openai` client's public API (`openai_compatible`), and one home each for the request
and its record (`api`), the retry policy and Retry-After (`retries`), Stop (`cancel`), the
response cache (`response_cache`) and the wire under the SDK (`wire`); `client.ModelClient` ties
them together. `agent.client` re-exports the names the rest of the project imports."""
