"""What ``benchmarks/text_time_to_loss.py`` measured (written by it, not by hand).

``TIME_TO_LOSS`` holds the runs of ``python -m scratchformer.train --task text`` (held-out bits
per character reached on a budget of process CPU-seconds, BLAS on one thread) and where and
when they ran. The chapter "Language modelling on real text" prints it as a table.
"""

TIME_TO_LOSS = {'machine': {'date': '2026-12-04',
             'commit': 'eed10c4',
             'cpu': 'AMD EPYC',
             'cores': 2,
             'blas_kernel': 'SkylakeX',
             'numpy': '2.4.6',
             'python': '3.11.7'},
 'runs': [{'tokenizer': 'char',
           'budget_seconds': 180.0,
           'seed': 0,
           'steps': 402,
           'bits_per_char': 1.9968,
           'cpu_seconds': 180.1,
           'sample': 'The state of the Union is each of the Constitution would be entraded it '
                     'savighances and of exient which is not substratives, hav'},
          {'tokenizer': 'bpe',
           'budget_seconds': 180.0,
           'seed': 0,
           'steps': 366,
           'bits_per_char': 1.721,
           'cpu_seconds': 180.4,
           'sample': 'The state of the Union is not too, your appropriations will kee starily '
                     'sattlessing in the plansas in which guard the receipts of what well to '
                     'repeals will not in Empration with the a log final passings and industry '
                     "to requadously character best that Rires's most keptments. This workers "
                     'certain its heretle, which are. Its from bac'},
          {'tokenizer': 'char',
           'budget_seconds': 600.0,
           'seed': 0,
           'steps': 1263,
           'bits_per_char': 1.6959,
           'cpu_seconds': 600.4,
           'sample': 'The state of the Union is dearly out the sole and its opened must be '
                     'free to the free departments which it is resources. By the '},
          {'tokenizer': 'bpe',
           'budget_seconds': 600.0,
           'seed': 0,
           'steps': 1152,
           'bits_per_char': 1.4735,
           'cpu_seconds': 600.3,
           'sample': 'The state of the Union is delivering with that community with key is the '
                     'industrial. I will not depress any amity for the past year a former '
                     'establishing calamities, also of taxed a large influences of station or '
                     'fraternal trade of our citizens upon settlements of all Americans, '
                     'determine all foreign boundary dispatchers. While, with which, which, '
                     'are on E'}]}
