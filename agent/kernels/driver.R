# sandlot R kernel driver. Run as: Rscript -e <rBoot>, which reads this file from stdin.
# fd 1/2: user output. fd 3: commands, each a header line "id n nenv" and
# then length-prefixed fields ("<bytes>\n" and the bytes): the code, then
# nenv name and value pairs. fd 4: results, one JSON object per line:
# {"started": id} as a cell's code starts, then {"id", "results",
# "error"}. A run's output is flushed before its result line. Cells run in
# the global environment; the driver's own state lives in this closure, so
# rm(list = ls()) cannot break the loop.
local({
  ctl <- file("/dev/fd/3", open = "rb", raw = TRUE)
  res <- file("/dev/fd/4", open = "wb", raw = TRUE)
  maxtext <- 1048576L

  field <- function() {
    n <- as.integer(readLines(ctl, n = 1L, warn = FALSE))
    if (length(n) != 1L || is.na(n)) stop("sandlot: bad frame")
    if (n == 0L) return("")
    b <- readBin(ctl, "raw", n = n)
    s <- rawToChar(b)
    Encoding(s) <- "UTF-8"
    s
  }

  jstr <- function(s) {
    s <- enc2utf8(paste(s, collapse = "\n"))
    if (nchar(s, type = "bytes") > maxtext) s <- paste0(substr(s, 1L, maxtext), "...")
    s <- gsub("\\", "\\\\", s, fixed = TRUE)
    s <- gsub("\"", "\\\"", s, fixed = TRUE)
    s <- gsub("\n", "\\n", s, fixed = TRUE)
    s <- gsub("\r", "\\r", s, fixed = TRUE)
    s <- gsub("\t", "\\t", s, fixed = TRUE)
    # Other control characters are not valid in a JSON string.
    s <- gsub("[\001-\037\177]", "?", s, useBytes = TRUE)
    paste0("\"", s, "\"")
  }

  # Calls of the user's code only: the driver's frames come first.
  user_calls <- function(calls) {
    keep <- character(0)
    for (cl in calls) {
      d <- paste(deparse(cl, nlines = 1L), collapse = " ")
      if (startsWith(d, "withCallingHandlers(") || startsWith(d, "tryCatch") ||
          startsWith(d, "eval(expr, globalenv())") || startsWith(d, "withVisible(")) {
        keep <- character(0)
        next
      }
      if (startsWith(d, ".handleSimpleError(") || startsWith(d, "h(simpleError(")) next
      keep <- c(keep, d)
    }
    keep
  }

  run_cell <- function(code) {
    results <- character(0)
    exprs <- tryCatch(parse(text = code, keep.source = FALSE), error = function(e) e)
    if (inherits(exprs, "error")) {
      msg <- conditionMessage(exprs)
      return(list(results = results, error = list(name = "ERROR", value = msg, traceback = paste0("Error in parse: ", msg))))
    }
    err <- NULL
    calls <- NULL
    for (expr in exprs) {
      r <- tryCatch(
        withCallingHandlers(
          withVisible(eval(expr, globalenv())),
          warning = function(w) {
            cl <- conditionCall(w)
            where <- if (is.null(cl)) "" else paste0("In ", paste(deparse(cl, nlines = 1L), collapse = " "), " : ")
            cat("Warning message:\n", where, conditionMessage(w), "\n", sep = "", file = stderr())
            invokeRestart("muffleWarning")
          },
          error = function(e) calls <<- sys.calls()
        ),
        error = function(e) e,
        interrupt = function(i) structure(class = c("sandlotInterrupt", "condition"), list(message = "interrupted", call = NULL))
      )
      if (inherits(r, "sandlotInterrupt")) {
        err <- list(name = "KeyboardInterrupt", value = "interrupted", traceback = "")
        break
      }
      if (inherits(r, "condition")) {
        msg <- conditionMessage(r)
        cl <- conditionCall(r)
        head <- if (is.null(cl)) paste0("Error: ", msg) else paste0("Error in ", paste(deparse(cl, nlines = 1L), collapse = " "), ": ", msg)
        tb <- user_calls(calls)
        if (length(tb)) head <- paste0(head, "\nTraceback:\n", paste0(seq_along(tb), ". ", tb, collapse = "\n"))
        err <- list(name = "ERROR", value = msg, traceback = head)
        break
      }
      if (isTRUE(r$visible)) {
        text <- tryCatch(paste(utils::capture.output(print(r$value)), collapse = "\n"),
                         error = function(e) paste0("<print failed: ", conditionMessage(e), ">"))
        results <- c(results, text)
      }
    }
    list(results = results, error = err)
  }

  # The next command, its env set for the run (old: each name's value
  # before it, NA for none, for finish to restore), or NULL at the end.
  next_command <- function() {
    head <- readLines(ctl, n = 1L, warn = FALSE)
    if (length(head) == 0L) return(NULL)
    parts <- strsplit(head, " ", fixed = TRUE)[[1]]
    nenv <- as.integer(parts[3])
    code <- field()
    env <- character(0)
    for (i in seq_len(nenv)) {
      k <- field()
      env[k] <- field()
    }
    old <- Sys.getenv(names(env), unset = NA, names = TRUE)
    if (length(env)) do.call(Sys.setenv, as.list(env))
    list(id = parts[1], code = code, env = env, old = old)
  }

  # Restores the run's env (envs are for one run only) and writes its
  # result, after its output.
  finish <- function(cmd, out) {
    for (k in names(cmd$env)) {
      if (is.na(cmd$old[[k]])) Sys.unsetenv(k) else do.call(Sys.setenv, stats::setNames(list(cmd$old[[k]]), k))
    }
    flush(stdout())
    flush(stderr())
    rs <- vapply(out$results, function(t) paste0("{\"text\":", jstr(t), "}"), "")
    e <- out$error
    ej <- if (is.null(e)) "null" else paste0("{\"name\":", jstr(e$name), ",\"value\":", jstr(e$value), ",\"traceback\":", jstr(e$traceback), "}")
    line <- paste0("{\"id\":", cmd$id, ",\"results\":[", paste(rs, collapse = ","), "],\"error\":", ej, "}\n")
    writeBin(charToRaw(enc2utf8(line)), res)
    flush(res)
  }

  # Tells the agent the cell's code starts: only from now does it send the
  # cell's interrupt (a timeout or cancel that came sooner waits for this).
  started <- function(id) {
    writeBin(charToRaw(paste0("{\"started\":", id, "}\n")), res)
    flush(res)
  }

  interrupted <- function(i) {
    list(results = character(0), error = list(name = "KeyboardInterrupt", value = "interrupted", traceback = ""))
  }

  # An interrupt (SIGINT) is for a cell's code. A non-interactive R halts
  # on one raised outside a handler, which took the kernel and its state
  # with it, so the whole loop runs with interrupts held
  # (suspendInterrupts), and they are allowed only inside handlers that
  # catch them (a jump to a tryCatch restores its hold). Before the cell
  # says it started, a pending interrupt is taken and dropped (Sys.sleep(0)
  # takes one): the agent sends the cell's only after, so one that came
  # sooner is a late one for the cell before, or one the agent did not
  # send. R checks for interrupts only now and then (every so many
  # evaluations), so an unheld driver met them at random points in its own
  # work: reading a command, restoring the env, writing the result.
  suspendInterrupts(repeat {
    cmd <- next_command()
    if (is.null(cmd)) break
    tryCatch(allowInterrupts(Sys.sleep(0)), interrupt = function(i) NULL)
    started(cmd$id)
    out <- tryCatch(allowInterrupts(run_cell(cmd$code)), interrupt = interrupted)
    finish(cmd, out)
  })
})
