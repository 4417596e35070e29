-- Headless Neovim 0.11 against `brrr-trace serve`: wait for the load, then write what the
-- client received (progress kinds, diagnostics, inlay hints, code lenses) to $OUT, one per line.
-- Run from the workspace folder: nvim --headless -u nvim_smoke.lua workloads.py
local out, progress = {}, {}
local cmd = { vim.env.PYTHON or 'python3', '-m', 'brrr_trace', 'serve' }
local function log(...) out[#out + 1] = string.format(...) end

vim.api.nvim_create_autocmd('LspProgress', {
  callback = function(ev) table.insert(progress, ev.data.params.value.kind) end,
})

vim.api.nvim_create_autocmd('VimEnter', { -- not at top level: the buffer is not ready there
  callback = function()
    local ok, err = pcall(function()
      local buf = vim.api.nvim_get_current_buf()
      vim.lsp.start({ name = 'brrr-trace', cmd = cmd, root_dir = vim.fn.getcwd() })
      local loaded = vim.wait(30000, function()
        return #vim.diagnostic.get(buf) > 0 and progress[#progress] == 'end'
      end, 20)
      log('loaded %s', tostring(loaded))
      log('progress %s', table.concat(progress, ','))
      for _, d in ipairs(vim.diagnostic.get(buf)) do
        log('diag %d:%d %s %s', d.lnum, d.col, d.code, d.source)
      end
      vim.lsp.inlay_hint.enable(true, { bufnr = buf }) -- headless never draws; get() has them
      vim.wait(10000, function() return #vim.lsp.inlay_hint.get({ bufnr = buf }) > 0 end, 20)
      for _, h in ipairs(vim.lsp.inlay_hint.get({ bufnr = buf })) do
        local label = h.inlay_hint.label
        if type(label) == 'table' then label = label[1].value end
        log('hint %d:%d %s', h.inlay_hint.position.line, h.inlay_hint.position.character, label)
      end
      vim.lsp.codelens.refresh({ bufnr = buf })
      vim.wait(10000, function() return #vim.lsp.codelens.get(buf) > 0 end, 20)
      for _, lens in ipairs(vim.lsp.codelens.get(buf)) do
        log('lens %d:%d %s', lens.range.start.line, lens.range.start.character, lens.command.title)
      end
    end)
    if not ok then log('ERROR %s', err) end
    vim.fn.writefile(out, vim.env.OUT or 'nvim-smoke.txt')
    vim.cmd('qa!')
  end,
})
