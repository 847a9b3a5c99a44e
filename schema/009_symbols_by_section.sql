-- Offline module symbols by (module, section, offset): what a frame from another machine,
-- given as a module-relative offset, is looked up by (query/frames.h). Their `addr` is the
-- offset into `section`, so the address index cannot serve them.
CREATE INDEX symbols_by_section ON symbols (module_id, section, addr) WHERE section IS NOT NULL;
