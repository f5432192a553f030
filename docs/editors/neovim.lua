-- graphfix's language server in neovim 0.7 or newer (init.lua). Neovim 0.7 (Debian 12, Ubuntu
-- 22.04) has no vim.lsp.start and no vim.fs: one client per project folder is started with
-- vim.lsp.start_client and attached to each Python buffer with vim.lsp.buf_attach_client.
local graphfix_clients = {} -- project folder -> client id

vim.api.nvim_create_autocmd("FileType", {
  pattern = "python",
  callback = function(args)
    local folder = vim.fn.fnamemodify(vim.api.nvim_buf_get_name(args.buf), ":p:h")
    local root = vim.fn.getcwd()
    for _, marker in ipairs({ ".graphfix.toml", "graphfix.toml", "pyproject.toml", ".git" }) do
      local found = vim.fn.findfile(marker, folder .. ";")
      if found == "" then found = vim.fn.finddir(marker, folder .. ";") end
      if found ~= "" then root = vim.fn.fnamemodify(found, ":p:h"):gsub("/%.git$", "") break end
    end
    local id = graphfix_clients[root]
    if id == nil or vim.lsp.get_client_by_id(id) == nil then
      id = vim.lsp.start_client({
        name = "graphfix",
        cmd = { "graphfix", "server" },
        root_dir = root,
        init_options = { settings = { unsafeFixes = false } }, -- also select = {...}, ignore = {...}
      })
      graphfix_clients[root] = id
    end
    vim.lsp.buf_attach_client(args.buf, id)
  end,
})

-- Every safe fix of the buffer at once (neovim 0.7's code_action cannot apply without asking).
function _G.graphfix_fix_all()
  local params = vim.lsp.util.make_range_params()
  params.context = { diagnostics = {}, only = { "source.fixAll.graphfix" } }
  for id, reply in pairs(vim.lsp.buf_request_sync(0, "textDocument/codeAction", params, 10000) or {}) do
    for _, action in ipairs(reply.result or {}) do
      vim.lsp.util.apply_workspace_edit(action.edit, vim.lsp.get_client_by_id(id).offset_encoding)
    end
  end
end
-- quick fix under the cursor: :lua vim.lsp.buf.code_action()
-- fix all safe: :lua graphfix_fix_all()
