CREATE TABLE payments (
    id     bigserial PRIMARY KEY,
    key    text      NOT NULL,
    amount bigint    NOT NULL
);
