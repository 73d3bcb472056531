-- Ledgers.corrected on its own: this coordinator's late corrections of the key's token
-- ledgers, when no acquire under the key carried them (SETTLE_IDLE after one was held, or
-- at close). ARGV: idle, their number, then six values each (tokens_corrected). Returns 1.
tokens_corrected(KEYS[6], KEYS[3], ARGS, 2)  -- ARGS: this script's ARGV
return 1
