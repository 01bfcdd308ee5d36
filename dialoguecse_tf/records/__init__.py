"""TFRecord types the data-prep stages write and the training stages read: one module per record
type holding its spec and its writer (`mlm`, `contrastive`, `pairs`, `dialogues`), what they
share (`common`) and the types by name (`registry`)."""
